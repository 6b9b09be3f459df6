// Copyright (c) fencedkv authors.

#include "resp_client.h"

#include <cerrno>
#include <cstring>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fencedkv {
namespace tools {

RespClient::~RespClient() { Close(); }

void RespClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  buf_.clear();
}

bool RespClient::Connect(const std::string& address, int timeout_ms,
                         std::string* error) {
  Close();
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    *error = "invalid address \"" + address + "\" (expected host:port)";
    return false;
  }
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    *error = "cannot resolve " + address + ": " + gai_strerror(rc);
    return false;
  }
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd_ = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd_ < 0) continue;
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd_, ai->ai_addr, ai->ai_addrlen) == 0) break;
    *error = "cannot connect to " + address + ": " + std::strerror(errno);
    close(fd_);
    fd_ = -1;
  }
  freeaddrinfo(res);
  return fd_ >= 0;
}

bool RespClient::Call(const std::vector<std::string>& args, Reply* reply,
                      std::string* error) {
  if (fd_ < 0) {
    *error = "not connected";
    return false;
  }
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  }
  size_t off = 0;
  while (off < out.size()) {
    const ssize_t n =
        send(fd_, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      *error = std::string("send: ") + std::strerror(errno);
      Close();
      return false;
    }
    off += static_cast<size_t>(n);
  }
  if (!ReadReply(reply, 0)) {
    *error = "connection closed or timed out";
    Close();
    return false;
  }
  return true;
}

bool RespClient::ReadLine(std::string* line) {
  size_t pos;
  while ((pos = buf_.find("\r\n")) == std::string::npos) {
    char tmp[4096];
    const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
  }
  *line = buf_.substr(0, pos);
  buf_.erase(0, pos + 2);
  return true;
}

bool RespClient::ReadReply(Reply* reply, int depth) {
  if (depth > 8) return false;
  std::string line;
  if (!ReadLine(&line) || line.empty()) return false;
  const std::string rest = line.substr(1);
  *reply = Reply();
  switch (line[0]) {
    case '+':
      reply->type = Reply::kStatus;
      reply->str = rest;
      return true;
    case '-':
      reply->type = Reply::kError;
      reply->str = rest;
      return true;
    case ':':
      reply->type = Reply::kInteger;
      reply->str = rest;
      reply->integer = std::strtoll(rest.c_str(), nullptr, 10);
      return true;
    case '$': {
      const long len = std::strtol(rest.c_str(), nullptr, 10);
      if (len < 0) {
        reply->type = Reply::kNil;
        return true;
      }
      while (buf_.size() < static_cast<size_t>(len) + 2) {
        char tmp[4096];
        const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
        if (n <= 0) return false;
        buf_.append(tmp, static_cast<size_t>(n));
      }
      reply->type = Reply::kBulk;
      reply->str = buf_.substr(0, static_cast<size_t>(len));
      buf_.erase(0, static_cast<size_t>(len) + 2);
      return true;
    }
    case '*': {
      const long n = std::strtol(rest.c_str(), nullptr, 10);
      if (n < 0) {
        reply->type = Reply::kNil;
        return true;
      }
      reply->type = Reply::kArray;
      reply->elements.resize(static_cast<size_t>(n));
      for (auto& e : reply->elements) {
        if (!ReadReply(&e, depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace tools
}  // namespace fencedkv
