// Copyright (c) fencedkv authors.

#include "etcd_process.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server_test_util.h"

namespace fencedkv {
namespace test {

namespace {
constexpr int kLowPort = 15000;
constexpr int kHighPort = 32000;
constexpr const char* kPortDir = "/tmp/fencedkv_test_ports";
}  // namespace

namespace {

// Reserves `port` for this process across the test processes of this
// machine (two suites may run at once): an exclusive flock on a file named
// after it, held (its descriptor open, close-on-exec) until this process
// ends, when the kernel drops it: no PID to check, no file to remove, and
// two processes cannot both hold it.
bool Reserve(int port) {
  if (mkdir(kPortDir, 0777) == 0) chmod(kPortDir, 01777);  // umask aside
  const std::string path = std::string(kPortDir) + "/" + std::to_string(port);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);  // another process holds it
    return false;
  }
  return true;  // fd stays open: the lock lasts as long as this process
}

}  // namespace

int FreePort() {
  // Below the kernel's ephemeral range (32768 and up here): bind(port 0)
  // hands out a port from that range, which any outgoing connection (a
  // client, a replica, etcd's own) may take as its local port before the
  // server this port is for binds it, or while that server restarts on it
  // ("Address already in use", seen in the etcd kill loop). Ports below
  // the range are never taken that way. A port is also reserved for this
  // process (Reserve), so another test process, of this suite or of
  // another running at once, does not pick it while its server is down;
  // and a bind checks it is free now. A port once returned is never
  // returned again by this process (its reservation is taken).
  static std::atomic<uint32_t> next{
      static_cast<uint32_t>(std::random_device()() % (kHighPort - kLowPort))};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port =
        kLowPort +
        static_cast<int>(next.fetch_add(1 + std::random_device()() % 64) %
                         (kHighPort - kLowPort));
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free =
        bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free && Reserve(port)) return port;
  }
  return 0;  // none: the caller fails (or, for a server, takes --port=0)
}

namespace {

// True once etcd on 127.0.0.1:port answers a read (it has a leader).
bool Serving(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string body = R"({"key":"AA=="})";
    const std::string request =
        "POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) reply.append(buf, n);
    }
  }
  close(fd);
  return reply.find("\"revision\"") != std::string::npos;
}

}  // namespace

std::string EtcdProcess::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(client_port_);
}

bool EtcdProcess::Start(const std::string& dir) {
  if (pid_ > 0) return true;
  if (dir_ != dir || client_port_ == 0) {
    dir_ = dir;
    client_port_ = FreePort();
    peer_port_ = FreePort();  // another reserved port: never the same
    if (client_port_ == 0 || peer_port_ == 0) {
      client_port_ = 0;
      return false;  // no free port could be reserved
    }
  }
  mkdir(dir.c_str(), 0755);
  const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> args = {"etcd",
                                   "--name=n1",
                                   "--data-dir=" + dir + "/data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=n1=" + peer,
                                   "--log-outputs=stderr"};
  const std::string log = dir + "/etcd.log";
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Killed if the test process dies without its destructors (a crash,
    // std::terminate, a timeout's SIGKILL). The signal follows the thread
    // that forked: tests start servers from their main thread.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);  // the parent is already gone
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("etcd", argv.data());
    _exit(127);
  }
  for (int i = 0; i < 400; ++i) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    if (Serving(client_port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Kill9();
  return false;
}

void EtcdProcess::Stop() {
  if (pid_ <= 0) return;
  Resume();
  kill(pid_, SIGTERM);
  for (int i = 0; i < 500; ++i) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill9();
}

void EtcdProcess::Kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void EtcdProcess::Pause() {
  // Returns once every thread is stopped: SIGSTOP alone returns before,
  // and a call made at once could still be answered.
  if (pid_ > 0) StopProcess(pid_);
}

void EtcdProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

}  // namespace test
}  // namespace fencedkv
