// Copyright (c) fencedkv authors.
//
// fencedkv-admin: inspect, check, back up and restore a fencedkv store
// (admin_tool.h; --help lists the verbs).

#include "admin_tool.h"
#include "util/open_files_limit.h"

int main(int argc, char** argv) {
  // The reading verbs open a store read-only, and that open holds every
  // SST file open (RocksDB's max_open_files -1): the soft open files limit
  // up to the hard one, so that a store of more than about a thousand
  // files opens (as the server does for its clients).
  fencedkv::RaiseOpenFilesLimit();
  return fencedkv::admin::RunAdminTool(argc, argv);
}
