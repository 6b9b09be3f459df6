// Copyright (c) fencedkv authors.
//
// fencedkv-admin: inspect, check, back up and restore a fencedkv store
// (admin_tool.h; --help lists the verbs).

#include <sys/resource.h>

#include "admin_tool.h"

int main(int argc, char** argv) {
  // The reading verbs open a store read-only, and that open holds every
  // SST file open (RocksDB's max_open_files -1): the soft open files limit
  // up to the hard one, so that a store of more than about a thousand
  // files opens (as the server does for its clients).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  return fencedkv::admin::RunAdminTool(argc, argv);
}
