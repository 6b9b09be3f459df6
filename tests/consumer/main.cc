// Uses only the installed public headers.
#include <cstdio>
#include <memory>

#include "fencedkv/db.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer <db-dir>\n");
    return 2;
  }
  fencedkv::Options options;
  options.create_if_missing = true;
  std::unique_ptr<fencedkv::DB> db;
  fencedkv::Status s = fencedkv::DB::Open(options, argv[1], &db);
  if (!s.ok()) {
    std::fprintf(stderr, "open: %s\n", s.ToString().c_str());
    return 1;
  }
  s = db->Put(fencedkv::WriteOptions(), "k", "v", 8);
  if (!s.ok()) return 1;
  s = db->Put(fencedkv::WriteOptions(), "k", "stale", 7);
  if (!s.IsStaleToken() || s.stale()->max != 8) return 1;
  std::string v;
  if (!db->Get(fencedkv::ReadOptions(), "k", &v).ok() || v != "v") return 1;
  std::printf("consumer OK: fencedkv %s, %s\n", FENCEDKV_VERSION_STRING,
              s.ToString().c_str());
  return 0;
}
