// Copyright (c) fencedkv authors.
//
// A minimal blocking RESP2 client for fencedkv's own tools (fencedkv-lock).
// Not thread-safe.

#ifndef FENCEDKV_TOOLS_RESP_CLIENT_H_
#define FENCEDKV_TOOLS_RESP_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fencedkv {
namespace tools {

struct Reply {
  enum Type { kStatus, kError, kInteger, kBulk, kNil, kArray } type = kNil;
  std::string str;      // status, error (without '-'), bulk
  int64_t integer = 0;  // kInteger (values past int64 are in str too)
  std::vector<Reply> elements;
};

class RespClient {
 public:
  RespClient() = default;
  ~RespClient();
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;

  // "host:port"; false with *error set on failure. timeout_ms bounds connect
  // and every later read/write.
  bool Connect(const std::string& address, int timeout_ms, std::string* error);
  // Sends a command and reads its reply; false on a connection error (then
  // the client is closed and must Connect again).
  bool Call(const std::vector<std::string>& args, Reply* reply,
            std::string* error);
  void Close();
  bool connected() const { return fd_ >= 0; }

 private:
  bool ReadLine(std::string* line);
  bool ReadReply(Reply* reply, int depth);
  int fd_ = -1;
  std::string buf_;
};

}  // namespace tools
}  // namespace fencedkv

#endif  // FENCEDKV_TOOLS_RESP_CLIENT_H_
