// Copyright (c) fencedkv authors.

#include "db/synced_stamp.h"

#include <memory>
#include <string_view>

#include <rocksdb/env.h>
#include <sys/stat.h>

#include "fencedkv/token.h"

namespace fencedkv {

namespace {

constexpr std::string_view kHeader = "fencedkv-synced 1";

// 0, or what a token may be (fencedkv/token.h: digits, no leading zero,
// at most 2^64-1).
bool ParseSequence(std::string_view s, uint64_t* out) {
  if (s == "0") {
    *out = 0;
    return true;
  }
  return ParseToken(s, out);
}

std::string PathOf(const std::string& dir) {
  return dir + "/" + kSyncedStampFile;
}

Status Unparsable(const std::string& path, const std::string& why) {
  return Status::Corruption(
      "cannot read " + path + ": " + why,
      "it records how far the write-ahead log was synced (docs/format.md); "
      "remove it to open the store without that check");
}

}  // namespace

Status ReadSyncedStamp(rocksdb::Env* env, const std::string& dir, bool* found,
                       uint64_t* sequence) {
  *found = false;
  *sequence = 0;
  const std::string path = PathOf(dir);
  rocksdb::Status rs = env->FileExists(path);
  if (rs.IsNotFound()) return Status::OK();
  if (!rs.ok()) return Status::IOError(path, rs.ToString());
  // A regular file of at most 4096 bytes, checked before reading (a FIFO
  // would block the open; a huge file would be read whole). The type only
  // through the local file system: another Env has no other kinds.
  if (env == rocksdb::Env::Default()) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return Unparsable(path, "it is not a regular file");
    }
  }
  uint64_t size = 0;
  rs = env->GetFileSize(path, &size);
  if (!rs.ok()) return Status::IOError(path, rs.ToString());
  if (size > 4096) return Unparsable(path, "longer than 4096 bytes");
  std::string data;
  rs = rocksdb::ReadFileToString(env, path, &data);
  if (!rs.ok()) return Status::IOError(path, rs.ToString());
  if (data.size() > 4096) return Unparsable(path, "longer than 4096 bytes");
  std::string_view rest = data;
  bool header = false;
  bool has_sequence = false;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    if (end == std::string_view::npos) {
      return Unparsable(path, "its last line has no newline");
    }
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    if (!header) {
      if (line != kHeader) {
        return Unparsable(
            path, "its first line is not \"" + std::string(kHeader) + "\"");
      }
      header = true;
    } else if (line.substr(0, 9) == "sequence ") {
      if (!ParseSequence(line.substr(9), sequence)) {
        return Unparsable(path,
                          "bad sequence line \"" + std::string(line) + "\"");
      }
      has_sequence = true;
    }
    // (Other lines: a later version's.)
  }
  if (!header) return Unparsable(path, "it is empty");
  if (!has_sequence) return Unparsable(path, "it has no sequence line");
  *found = true;
  return Status::OK();
}

Status WriteSyncedStamp(rocksdb::Env* env, const std::string& dir,
                        uint64_t sequence) {
  const std::string path = PathOf(dir);
  const std::string tmp = path + ".tmp";
  const std::string content =
      std::string(kHeader) + "\nsequence " + std::to_string(sequence) + "\n";
  rocksdb::Status rs = rocksdb::WriteStringToFile(env, rocksdb::Slice(content),
                                                  tmp, /*should_sync=*/true);
  if (rs.ok()) rs = env->RenameFile(tmp, path);
  if (rs.ok()) {
    std::unique_ptr<rocksdb::Directory> d;
    rs = env->NewDirectory(dir, &d);
    if (rs.ok()) rs = d->Fsync();
    // (An Env without directories, in-memory ones: the rename is all.)
    if (rs.IsNotSupported()) rs = rocksdb::Status::OK();
  }
  if (!rs.ok()) return Status::IOError(path, rs.ToString());
  return Status::OK();
}

Status CheckSyncedStamp(const std::string& dir, bool found, uint64_t stamped,
                        uint64_t recovered) {
  if (!found || recovered >= stamped) return Status::OK();
  return Status::Corruption(
      "the store recovered to sequence " + std::to_string(recovered) +
          ", but writes up to sequence " + std::to_string(stamped) +
          " had been synced (" + PathOf(dir) +
          "): a write-ahead log file (NNNNNN.log) is gone or the MANIFEST "
          "lost an edit",
      "opening would drop those writes, with every fence raise and lease "
      "grant among them, and accept tokens they fenced out. Put the missing "
      "file back, or restore the store from a replica or a backup; to open "
      "it with what is left, set Options::drop_wal_after_damage "
      "(fencedkv-server --drop_wal_after_damage)");
}

}  // namespace fencedkv
