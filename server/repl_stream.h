// Copyright (c) fencedkv authors.
//
// The replication stream's wire (docs/replication.md "The stream"): RESP
// arrays of bulk strings in both directions, over a TCP connection the
// replica opens to the primary's RESP port.
//
//   replica -> primary  FENCEDKV.SYNC history addr max_epoch log_epoch seq
//                                     domain mode sync|nosync
//                                     [node [log_id [sized]]]
//   primary -> replica  +CONTINUE epoch history epochs
//                       | +FULLSYNC epoch history epochs files [bytes seq]
//                       | -CODE message
//   primary -> replica  FENCEDKV.LOG epoch first_seq batch   (continue)
//                       FENCEDKV.PING latest_seq             (when idle)
//                       FENCEDKV.FILE name chunk ... FENCEDKV.FILESDONE n
//   replica -> primary  FENCEDKV.ACK seq
//
// Each end of a link is one thread doing blocking I/O with deadlines
// (ReplSocket), so an io loop never waits for a replica.

#ifndef FENCEDKV_SERVER_REPL_STREAM_H_
#define FENCEDKV_SERVER_REPL_STREAM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/status.h"

#include "resp_parser.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

// A connected TCP socket with deadlines on every call. Thread-compatible,
// except ShutdownBoth, which another thread may call to wake a blocked one.
class ReplSocket {
 public:
  ReplSocket() = default;
  explicit ReplSocket(int fd) : fd_(fd) {}
  ~ReplSocket() { Close(); }
  ReplSocket(const ReplSocket&) = delete;
  ReplSocket& operator=(const ReplSocket&) = delete;

  // Connects to "host:port" ("[v6]:port" too) within `timeout`.
  Status Connect(const std::string& host_port,
                 std::chrono::milliseconds timeout);
  // Sends all of `data`. IOError if the peer is gone or took nothing for
  // `timeout`.
  Status SendAll(std::string_view data, std::chrono::milliseconds timeout);
  // Waits up to `timeout` for bytes and appends what is there (at most
  // `max`) to *buf. OK with nothing appended on a timeout, or when
  // `wake_fd` (an eventfd, if >= 0) was written (it is drained; with a
  // zero timeout it is neither polled nor drained); IOError
  // when the peer closed ("closed by peer") or on an error.
  Status ReadSome(std::string* buf, std::chrono::milliseconds timeout,
                  size_t max = 1 << 20, int wake_fd = -1);
  // Wakes any call blocked on the socket (it then fails). The one call
  // another thread may make while the owner uses the socket: it and Close
  // are serialized, so it never reaches a descriptor number the owner has
  // closed (and the process may have reused for another file).
  void ShutdownBoth() LOCKS_EXCLUDED(close_mu_);
  void Close() LOCKS_EXCLUDED(close_mu_);
  int fd() const { return fd_.load(std::memory_order_acquire); }
  bool open() const { return fd() >= 0; }

 private:
  // Changed only by the owner's thread (Connect, Close), under close_mu_;
  // read by the owner without it, by ShutdownBoth with it.
  std::atomic<int> fd_{-1};
  Mutex close_mu_;
};

// Splits "host:port" ("[v6]:port" too); false if it is not that: port
// 1..65535, host only letters, digits and . - : _ % (a name or an address),
// and a host with a colon an IPv6 address.
bool SplitHostPort(std::string_view host_port, std::string* host, int* port);

// Where a connection to an address lands, as far as this server can tell
// (Server::ReachesSelf): on this very server's acceptor, somewhere else (or
// nowhere: refused, timed out), or unknown (this server does not accept
// connections yet).
enum class AddressReach { kThisServer, kElsewhere, kUnknown };
// "host:port", or "[host]:port" for an IPv6 host.
std::string JoinHostPort(const std::string& host, int port);
// --replicaof's "start as a primary": "none" or "no one", any case.
bool IsReplicaOfNone(std::string_view value);
// One spelling per address: "::1:7379" and "[::1]:7379" are "[::1]:7379".
// Anything SplitHostPort refuses comes back unchanged.
std::string NormalizeHostPort(std::string_view host_port);
// An address that names no one host: empty, 0.0.0.0, :: (any spelling),
// ::ffff:0.0.0.0.
bool IsWildcardHost(std::string_view host);
// localhost, 127.0.0.0/8, ::1, ::ffff:127.x.x.x.
bool IsLoopbackHost(std::string_view host);
// Whether a connection to `target` ("host:port") lands on a socket
// listening at `listen` ("host:port" as bound, its host possibly a
// wildcard) on this host: the ports match and an address `target`'s host
// resolves to is `listen`'s, or, for a wildcard `listen`, one of this
// host's (loopback, or an interface's). Catches every spelling of this
// server's own address (localhost, 127.1, 0.0.0.0, ::ffff:127.0.0.1)
// without a connection: Server::ReachesSelf needs the acceptor, which does
// not run yet at start and which a command on its own loop blocks.
bool ListenerReachedBy(std::string_view listen, std::string_view target);
// The address the primary knows a replica by: the one it announced in its
// handshake, unless that names no host (a replica bound to 0.0.0.0 without
// --announce_addr) or a loopback address while the replica connects from
// elsewhere: then the address it connects from (fd's peer) with the
// announced port, as Redis does. False if `announced` is not host:port.
bool ReplicaAddress(std::string_view announced, int fd, std::string* addr);

// Appends a RESP array of bulk strings.
void AppendFrame(std::string* out,
                 std::initializer_list<std::string_view> words);
void AppendFrame(std::string* out, const std::vector<std::string>& words);

// Reads frames (RESP arrays of bulk strings) from a byte stream.
// Not thread-safe.
class FrameReader {
 public:
  explicit FrameReader(size_t max_frame_bytes);
  // The buffer the caller appends received bytes to.
  std::string* buffer() { return &in_; }
  // The next complete frame: true and *words (valid until the next call);
  // false if more bytes are needed, or on malformed input (then error() is
  // set and the stream must be dropped).
  bool Next(std::vector<std::string_view>* words);
  const std::string& error() const { return error_; }
  // Whether the error is a frame (or one of its words) declared larger
  // than max_frame_bytes, rather than malformed input.
  bool over_limit() const { return over_limit_; }
  size_t buffered() const { return in_.size() - begin_; }

 private:
  const size_t max_frame_bytes_;
  bool over_limit_ = false;
  RespParser parser_;
  std::string in_;
  size_t begin_ = 0;
  std::string error_;
};

// Reads one reply line ("+..." or "-...", CRLF stripped) into *line within
// `timeout`, keeping what follows it in *buf. IOError if none came, the
// peer closed, or the line is over 64 KiB.
Status ReadReplyLine(ReplSocket* socket, std::string* buf, std::string* line,
                     std::chrono::milliseconds timeout);

// Parses an unsigned decimal; false unless all of `text` is one.
bool ParseU64Text(std::string_view text, uint64_t* v);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_REPL_STREAM_H_
