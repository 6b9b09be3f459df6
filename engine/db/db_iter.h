// Copyright (c) fencedkv authors.
//
// The user-facing iterator: walks the data column family and hides no-value
// records (deleted keys that keep their token), exposing values without
// their record header.

#ifndef FENCEDKV_ENGINE_DB_DB_ITER_H_
#define FENCEDKV_ENGINE_DB_DB_ITER_H_

#include <memory>

#include <rocksdb/db.h>

#include "fencedkv/iterator.h"
#include "fencedkv/options.h"

namespace fencedkv {

std::unique_ptr<Iterator> NewDBIterator(rocksdb::DB* db,
                                        rocksdb::ColumnFamilyHandle* data_cf,
                                        const ReadOptions& options);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_DB_ITER_H_
