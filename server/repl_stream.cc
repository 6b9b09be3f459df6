// Copyright (c) fencedkv authors.

#include "repl_stream.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/sync_point.h"

namespace fencedkv {
namespace server {

namespace {

using std::chrono::milliseconds;

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits for `events` on fd for at most timeout_ms: >0 ready, 0 timed out,
// <0 error.
int WaitFor(int fd, short events, int64_t timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int rc =
        poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout_ms)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc > 0 && (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & events)) {
      return -1;
    }
    return rc;
  }
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

}  // namespace

namespace {

// An IPv6 address, with an optional %zone (which inet_pton does not take).
bool ParseIp6(std::string_view host, in6_addr* a) {
  const std::string text(host.substr(0, host.find('%')));
  return inet_pton(AF_INET6, text.c_str(), a) == 1;
}

bool ParseIp4(std::string_view host, in_addr* a) {
  const std::string text(host);
  return inet_pton(AF_INET, text.c_str(), a) == 1;
}

}  // namespace

bool IsReplicaOfNone(std::string_view value) {
  std::string lower(value);
  for (char& c : lower) c = static_cast<char>(std::tolower(c));
  return lower == "none" || lower == "no one";
}

bool SplitHostPort(std::string_view host_port, std::string* host, int* port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = host_port.substr(0, colon);
  const bool bracketed = h.size() >= 2 && h.front() == '[' && h.back() == ']';
  if (bracketed) h = h.substr(1, h.size() - 2);
  uint64_t p = 0;
  if (h.empty() || !ParseU64Text(host_port.substr(colon + 1), &p) || p == 0 ||
      p > 65535) {
    return false;
  }
  // A host name, an IPv4 or an IPv6 address (with a %zone): nothing that
  // could break a line of INFO or ROLE, which print it.
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                    c == ':' || c == '_' || c == '%';
    if (!ok) return false;
  }
  // A host with a colon is an IPv6 address, bracketed or not ("::1:7379" is
  // [::1]:7379; "fe80::1" is not fe80: port 1).
  in6_addr a6;
  if ((bracketed || h.find(':') != std::string_view::npos) &&
      !ParseIp6(h, &a6)) {
    return false;
  }
  *host = std::string(h);
  *port = static_cast<int>(p);
  return true;
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

std::string NormalizeHostPort(std::string_view host_port) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(host_port, &host, &port)) return std::string(host_port);
  return JoinHostPort(host, port);
}

bool IsWildcardHost(std::string_view host) {
  if (host.empty()) return true;
  in_addr a4;
  if (ParseIp4(host, &a4)) return a4.s_addr == htonl(INADDR_ANY);
  in6_addr a6;
  if (ParseIp6(host, &a6)) {
    if (IN6_IS_ADDR_UNSPECIFIED(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      return a6.s6_addr[12] == 0 && a6.s6_addr[13] == 0 &&
             a6.s6_addr[14] == 0 && a6.s6_addr[15] == 0;
    }
  }
  return false;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  in_addr a4;
  if (ParseIp4(host, &a4)) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6;
  if (ParseIp6(host, &a6)) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;
  }
  return false;
}

namespace {

// An address as IPv6 bytes (IPv4 as ::ffff:a.b.c.d); the unspecified
// address as the loopback one, where a connection to it goes.
bool AsV6(const sockaddr* sa, in6_addr* out) {
  if (sa->sa_family == AF_INET) {
    in_addr a = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr;
    if (a.s_addr == htonl(INADDR_ANY)) a.s_addr = htonl(INADDR_LOOPBACK);
    *out = in6_addr{};
    out->s6_addr[10] = 0xff;
    out->s6_addr[11] = 0xff;
    std::memcpy(&out->s6_addr[12], &a.s_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    *out = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_UNSPECIFIED(out)) *out = in6addr_loopback;
    return true;
  }
  return false;
}

std::vector<in6_addr> Resolve(const std::string& host) {
  std::vector<in6_addr> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    in6_addr v6;
    if (AsV6(a->ai_addr, &v6)) out.push_back(v6);
  }
  freeaddrinfo(res);
  return out;
}

bool IsLocalAddress(const in6_addr& a) {
  if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  if (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (ifaddrs* i = list; i != nullptr && !local; i = i->ifa_next) {
    in6_addr v6;
    if (i->ifa_addr != nullptr && AsV6(i->ifa_addr, &v6)) {
      local = std::memcmp(&v6, &a, sizeof(a)) == 0;
    }
  }
  freeifaddrs(list);
  return local;
}

}  // namespace

bool ListenerReachedBy(std::string_view listen, std::string_view target) {
  std::string listen_host, target_host;
  int listen_port = 0, target_port = 0;
  if (!SplitHostPort(listen, &listen_host, &listen_port) ||
      !SplitHostPort(target, &target_host, &target_port) ||
      listen_port != target_port) {
    return false;
  }
  const bool wildcard = IsWildcardHost(listen_host);
  const std::vector<in6_addr> mine =
      wildcard ? std::vector<in6_addr>() : Resolve(listen_host);
  for (const in6_addr& t : Resolve(target_host)) {
    if (wildcard) {
      if (IsLocalAddress(t)) return true;
      continue;
    }
    for (const in6_addr& m : mine) {
      if (std::memcmp(&m, &t, sizeof(t)) == 0) return true;
    }
  }
  return false;
}

bool ReplicaAddress(std::string_view announced, int fd, std::string* addr) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(announced, &host, &port)) return false;
  const bool wildcard = IsWildcardHost(host);
  if (!wildcard && !IsLoopbackHost(host)) {
    *addr = JoinHostPort(host, port);
    return true;
  }
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
    return false;
  }
  char text[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, text, sizeof(text),
                  nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  std::string peer_host = text;
  // An IPv4 client of a dual-stack socket: ::ffff:a.b.c.d is a.b.c.d.
  if (peer_host.rfind("::ffff:", 0) == 0 &&
      peer_host.find('.') != std::string::npos) {
    peer_host.erase(0, 7);
  }
  // A loopback name is taken from a loopback peer only: from another
  // machine it is that machine's own loopback (a replica left on the
  // default --bind), and two such replicas would share one name.
  if (!wildcard && IsLoopbackHost(peer_host)) peer_host = host;
  *addr = JoinHostPort(peer_host, port);
  return true;
}

Status ReplSocket::Connect(const std::string& host_port, milliseconds timeout) {
  Close();
  std::string host;
  int port = 0;
  if (!SplitHostPort(host_port, &host, &port)) {
    return Status::InvalidArgument("not host:port: '" + host_port + "'");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai =
      getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) {
    return Status::IOError("cannot resolve " + host, gai_strerror(gai));
  }
  Status last = Status::IOError("no address for " + host_port);
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
               a->ai_protocol);
    if (fd < 0) {
      last = Status::IOError(Errno("socket"));
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (WaitFor(fd, POLLOUT, timeout.count()) > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc != 0) {
      last = Status::IOError("cannot connect to " + host_port,
                             std::strerror(errno));
      close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    {
      MutexLock lock(&close_mu_);
      fd_.store(fd, std::memory_order_release);
    }
    freeaddrinfo(res);
    return Status::OK();
  }
  freeaddrinfo(res);
  return last;
}

Status ReplSocket::SendAll(std::string_view data, milliseconds timeout) {
  const int fd = this->fd();  // the owner's thread: only it changes it
  if (fd < 0) return Status::IOError("not connected");
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int rc = WaitFor(fd, POLLOUT, timeout.count());
      if (rc == 0) {
        return Status::IOError("send timed out: the peer took nothing for " +
                               std::to_string(timeout.count()) + " ms");
      }
      if (rc < 0) return Status::IOError("send: connection broken");
      continue;
    }
    return Status::IOError(Errno("send"));
  }
  return Status::OK();
}

Status ReplSocket::ReadSome(std::string* buf, milliseconds timeout, size_t max,
                            int wake_fd) {
  const int fd = this->fd();  // the owner's thread: only it changes it
  if (fd < 0) return Status::IOError("not connected");
  int rc;
  if (timeout.count() <= 0) {
    rc = 1;  // no wait: recv says whether anything is there (one syscall)
  } else if (wake_fd >= 0) {
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    do {
      rc = poll(p, 2, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    } while (rc < 0 && errno == EINTR);
    if (rc > 0 && (p[1].revents & POLLIN)) {
      uint64_t ignored;
      while (read(wake_fd, &ignored, sizeof(ignored)) > 0) {
      }
    }
    if (rc > 0 && !(p[0].revents & (POLLIN | POLLERR | POLLHUP))) {
      return Status::OK();  // woken, nothing to read
    }
    if (rc > 0 && (p[0].revents & (POLLERR | POLLNVAL)) &&
        !(p[0].revents & POLLIN)) {
      rc = -1;
    }
  } else {
    rc = WaitFor(fd, POLLIN, timeout.count());
  }
  if (rc == 0) return Status::OK();
  if (rc < 0) return Status::IOError("recv: connection broken");
  char chunk[64 << 10];
  ssize_t n;
  do {
    n = recv(fd, chunk, std::min(max, sizeof(chunk)), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Status::IOError("closed by peer");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
    return Status::IOError(Errno("recv"));
  }
  buf->append(chunk, static_cast<size_t>(n));
  return Status::OK();
}

void ReplSocket::ShutdownBoth() {
  MutexLock lock(&close_mu_);
  const int fd = fd_.load(std::memory_order_acquire);
  TEST_SYNC_POINT("ReplSocket::ShutdownBoth");
  if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

void ReplSocket::Close() {
  MutexLock lock(&close_mu_);
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) close(fd);
}

namespace {
template <typename Words>
void AppendWords(std::string* out, const Words& words) {
  out->append("*" + std::to_string(words.size()) + "\r\n");
  for (std::string_view w : words) {
    out->append("$" + std::to_string(w.size()) + "\r\n");
    out->append(w.data(), w.size());
    out->append("\r\n");
  }
}
}  // namespace

void AppendFrame(std::string* out,
                 std::initializer_list<std::string_view> words) {
  AppendWords(out, words);
}

void AppendFrame(std::string* out, const std::vector<std::string>& words) {
  AppendWords(out, words);
}

namespace {
RespParser::Limits FrameLimits(size_t max_frame_bytes) {
  RespParser::Limits l;
  l.max_request_bytes = max_frame_bytes;
  l.max_args = 16;
  return l;
}

// The first bulk length the RESP array at buf[0, n) declares above `max`
// (0 if none does, as far as its headers are complete): the parser only
// says "invalid bulk length", the same as for malformed input.
uint64_t DeclaredBulkOver(const char* buf, size_t n, size_t max) {
  size_t pos = 0;
  auto number = [&](char type, uint64_t* v) {
    if (pos >= n || buf[pos] != type) return false;
    size_t i = pos + 1;
    uint64_t x = 0;
    size_t digits = 0;
    while (i < n && buf[i] >= '0' && buf[i] <= '9' && digits < 20) {
      x = x * 10 + static_cast<uint64_t>(buf[i] - '0');
      ++i;
      ++digits;
    }
    if (digits == 0 || i + 1 >= n || buf[i] != '\r' || buf[i + 1] != '\n') {
      return false;
    }
    *v = x;
    pos = i + 2;
    return true;
  };
  uint64_t count = 0;
  if (!number('*', &count)) return 0;
  for (uint64_t k = 0; k < count; ++k) {
    uint64_t len = 0;
    if (!number('$', &len)) return 0;
    if (len > max) return len;
    if (n - pos < len + 2) return 0;
    pos += len + 2;
  }
  return 0;
}
}  // namespace

FrameReader::FrameReader(size_t max_frame_bytes)
    : max_frame_bytes_(max_frame_bytes),
      parser_(FrameLimits(max_frame_bytes)) {}

bool FrameReader::Next(std::vector<std::string_view>* words) {
  if (!error_.empty()) return false;
  if (begin_ > 0 && begin_ >= in_.size() / 2) {
    in_.erase(0, begin_);  // keep the buffer from growing without end
    begin_ = 0;
  }
  if (begin_ == in_.size()) return false;
  if (in_[begin_] != '*') {
    static const char kHex[] = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(in_[begin_]);
    error_ = std::string("not a RESP array (first byte 0x") + kHex[byte >> 4] +
             kHex[byte & 15] + ")";
    return false;
  }
  size_t consumed = 0;
  const auto r =
      parser_.Parse(in_.data() + begin_, in_.size() - begin_, words, &consumed);
  if (r == RespParser::Result::kNeedMore) return false;
  if (r == RespParser::Result::kError) {
    error_ = parser_.error();
    const uint64_t over = DeclaredBulkOver(
        in_.data() + begin_, in_.size() - begin_, max_frame_bytes_);
    if (over > 0 || error_.rfind("request of more than", 0) == 0) {
      over_limit_ = true;
      error_ = over > 0 ? "a frame word of " + std::to_string(over) + " bytes"
                        : "a frame of more than " +
                              std::to_string(max_frame_bytes_) + " bytes";
    }
    return false;
  }
  begin_ += consumed;
  if (words->empty()) {
    error_ = "an empty frame";
    return false;
  }
  return true;
}

Status ReadReplyLine(ReplSocket* socket, std::string* buf, std::string* line,
                     milliseconds timeout) {
  const int64_t deadline = SteadyNowMs() + timeout.count();
  for (;;) {
    const size_t eol = buf->find("\r\n");
    if (eol != std::string::npos) {
      *line = buf->substr(0, eol);
      buf->erase(0, eol + 2);
      return Status::OK();
    }
    if (buf->size() > (64 << 10)) {
      return Status::IOError("a reply line of more than 64 KiB");
    }
    const int64_t left = deadline - SteadyNowMs();
    if (left <= 0)
      return Status::IOError("no reply within " +
                             std::to_string(timeout.count()) + " ms");
    Status s = socket->ReadSome(buf, milliseconds(left), 64 << 10);
    if (!s.ok()) return s;
  }
}

bool ParseU64Text(std::string_view text, uint64_t* v) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  auto r = std::from_chars(text.data(), text.data() + text.size(), *v);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

}  // namespace server
}  // namespace fencedkv
