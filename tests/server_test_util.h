// Copyright (c) fencedkv authors.
//
// Test helpers for the server suites: fencedkv-server as a child process on
// 127.0.0.1 (a free port, stopped by PID) and a blocking RESP client over a
// raw socket, which can also misbehave (send half a request, never read).
//
// Not thread-safe: one object per thread.

#ifndef FENCEDKV_TESTS_SERVER_TEST_UTIL_H_
#define FENCEDKV_TESTS_SERVER_TEST_UTIL_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace fencedkv {
namespace test {

class ServerProcess {
 public:
  explicit ServerProcess(std::string binary) : binary_(std::move(binary)) {}
  ~ServerProcess() { Kill9(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts the server with `flags` plus --bind=127.0.0.1 --port=0 (unless
  // `flags` has a --port), a port
  // file and its logs in `dir`; true once it listens. If nofile > 0, the
  // child's RLIMIT_NOFILE (soft and hard) is set to it first, as
  // `ulimit -n` would.
  bool Start(const std::string& dir, std::vector<std::string> flags,
             int nofile = 0);
  // SIGTERM; the exit status (128 + signal if killed), -1 if it did not
  // exit within 10 s (it is then killed).
  int Stop();
  // Waits for the server to exit by itself (SHUTDOWN): its exit status as
  // Stop's, -1 if it did not exit within timeout_ms (it is then killed).
  int WaitExit(int timeout_ms = 10000);
  void Kill9();
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The server's resident set (VmRSS) in KiB, -1 if not running.
  long RssKiB() const;
  // The server's CPU time (user + system) in seconds, -1 if not running.
  double CpuSeconds() const;
  // The server's minor page faults so far, -1 if not running.
  long long MinorFaults() const;
  // The server's glog INFO file contents (everything it logged).
  std::string Log() const;

 private:
  int Wait(int timeout_ms);
  const std::string binary_;
  std::string dir_;
  // Atomic: a test's writer thread may ask pid() (is it running?) while
  // the test kills and restarts the server (TSan saw the race).
  std::atomic<pid_t> pid_{-1};
  int port_ = 0;
};

// A thread that is joined on every way out of its scope -- an ASSERT that
// returns early included -- after `stop` (if given) told it to end. A
// std::thread destroyed while joinable calls std::terminate: the test
// process dies at once, and no destructor stops the servers and etcd it
// started.
class ScopedThread {
 public:
  explicit ScopedThread(std::function<void()> body,
                        std::function<void()> stop = nullptr)
      : stop_(std::move(stop)), thread_(std::move(body)) {}
  ~ScopedThread() { Join(); }
  ScopedThread(const ScopedThread&) = delete;
  ScopedThread& operator=(const ScopedThread&) = delete;
  ScopedThread(ScopedThread&& other) noexcept
      : stop_(std::exchange(other.stop_, nullptr)),
        thread_(std::move(other.thread_)) {}
  // Tells it to stop (stop) and waits for it; idempotent.
  void Join() {
    if (stop_) stop_();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::function<void()> stop_;
  std::thread thread_;
};

class RespTestClient {
 public:
  // Connects to host:port (an IPv4 address). Reads and writes block for at
  // most timeout_ms each. rcvbuf_bytes > 0: its socket's receive buffer
  // (SO_RCVBUF, set before connecting), for a client slow to take replies.
  explicit RespTestClient(int port, int timeout_ms = 10000,
                          const std::string& host = "127.0.0.1",
                          int rcvbuf_bytes = 0);
  ~RespTestClient();
  RespTestClient(const RespTestClient&) = delete;
  RespTestClient& operator=(const RespTestClient&) = delete;
  bool connected() const { return connected_; }

  // Sends everything, or as much as the peer took before the timeout or an
  // error. Returns the bytes sent.
  size_t SendRaw(const std::string& bytes);
  static std::string Encode(const std::vector<std::string>& words);
  void Send(const std::vector<std::string>& words) { SendRaw(Encode(words)); }

  // One reply, rendered: "+OK" "-ERR x" ":3" "$v" "$nil" "*[a,b]", "EOF"
  // (closed) or "TIMEOUT".
  std::string Read();
  std::string Call(const std::vector<std::string>& words) {
    Send(words);
    return Read();
  }
  // Everything until the peer closes (for HTTP).
  std::string ReadAll();
  // True if the peer has closed the connection (reads what is pending).
  bool PeerClosed();
  void Close();

 private:
  // 1 if bytes arrived, 0 on EOF, -1 on timeout or error.
  int Fill();
  bool ReadLine(std::string* line, std::string* error);
  bool ReadN(size_t n, std::string* out, std::string* error);
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

// `INFO section` of the server on `port` as name -> value (empty if it did
// not answer within timeout_ms).
std::map<std::string, std::string> InfoFields(int port,
                                              const std::string& section,
                                              int timeout_ms = 5000);

// Polls `pred` every 20 ms until it holds (true) or timeout_ms pass (false).
bool WaitUntil(const std::function<bool()>& pred, int timeout_ms);

// SIGSTOP, then waits (up to 5 s) until every thread of `pid` is stopped:
// the signal takes effect asynchronously, and on a busy machine the process
// may run on for a moment.
void StopProcess(pid_t pid);

// Runs `command` with sh; its exit status (-1 if it did not exit) and
// everything it wrote to stdout.
std::pair<int, std::string> RunCommand(const std::string& command);

}  // namespace test
}  // namespace fencedkv

#endif  // FENCEDKV_TESTS_SERVER_TEST_UTIL_H_
