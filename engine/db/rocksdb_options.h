// Copyright (c) fencedkv authors.
//
// The one translation of fencedkv::Options into RocksDB options, shared by
// the engine and by tools that need a raw-RocksDB baseline with exactly the
// same tuning (fenced_bench --fenced=false). Not installed.

#ifndef FENCEDKV_ENGINE_DB_ROCKSDB_OPTIONS_H_
#define FENCEDKV_ENGINE_DB_ROCKSDB_OPTIONS_H_

#include <string>

#include <rocksdb/options.h>

#include "fencedkv/options.h"
#include "fencedkv/status.h"

namespace fencedkv {

// Fills *db_options and *cf_options (the data column family's) from
// `options`. Returns InvalidArgument for an unknown compression or memtable
// name.
Status BuildRocksDBOptions(const Options& options,
                           rocksdb::DBOptions* db_options,
                           rocksdb::ColumnFamilyOptions* cf_options);

// Read options for an iterator over the data or fence column family: total
// order, which the "hash" memtable's per-key prefix extractor would
// otherwise turn into prefix-only iteration.
rocksdb::ReadOptions IteratorReadOptions();

// Maps a RocksDB status onto a fencedkv one, keeping the message.
Status FromRocksDB(const rocksdb::Status& s);

// OK if the RocksDB database at `path` has exactly fencedkv's column
// families (default, fence, meta); else InvalidArgument "not a fencedkv
// database", saying what it has. Reads the MANIFEST only.
// (A directory whose newest OPTIONS file records fencedkv's column
// families but whose MANIFEST lists others, or cannot be read, is a
// damaged fencedkv database: Corruption, which fencedkv-admin check
// reports as damage.)
Status CheckColumnFamilies(const rocksdb::DBOptions& options,
                           const std::string& path);
// Whether the newest OPTIONS-<n> file in `path` records fencedkv's column
// families (fence and meta): the directory was a fencedkv database.
bool OptionsNameFencedkvFamilies(rocksdb::Env* env, const std::string& path);

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_DB_ROCKSDB_OPTIONS_H_
