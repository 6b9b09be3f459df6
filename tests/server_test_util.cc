// Copyright (c) fencedkv authors.

#include "server_test_util.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_process.h"

namespace fencedkv {
namespace test {

bool ServerProcess::Start(const std::string& dir,
                          std::vector<std::string> flags, int nofile) {
  dir_ = dir;
  const std::string port_file = dir + "/port";
  unlink(port_file.c_str());
  flags.push_back("--bind=127.0.0.1");
  // A free port, unless the caller chose one (a replica's address). Not
  // --port=0: that port comes from the ephemeral range, and a replica that
  // restarts itself after a full copy binds it again, by which time an
  // outgoing connection may hold it (test::FreePort).
  if (std::none_of(flags.begin(), flags.end(), [](const std::string& f) {
        return f.rfind("--port=", 0) == 0;
      })) {
    const int port = test::FreePort();  // 0 if none could be reserved
    flags.push_back("--port=" + std::to_string(port));
  }
  flags.push_back("--port_file=" + port_file);
  flags.push_back("--logtostderr=false");
  flags.push_back("--log_dir=" + dir);
  flags.push_back("--logbuflevel=-1");  // Log() sees every line at once
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Killed if the test process dies without its destructors (a crash,
    // std::terminate, a timeout's SIGKILL). The signal follows the thread
    // that forked: tests start servers from their main thread.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);  // the parent is already gone
    if (nofile > 0) {
      const rlimit limit{static_cast<rlim_t>(nofile),
                         static_cast<rlim_t>(nofile)};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary_.c_str()));
    for (auto& f : flags) argv.push_back(f.data());
    argv.push_back(nullptr);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    close(devnull);
    execv(binary_.c_str(), argv.data());
    _exit(127);
  }
  for (int i = 0; i < 800; ++i) {
    std::ifstream in(port_file);
    if (in >> port_) return true;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const int status = Wait(10000);
  if (status == -1) Kill9();
  return status;
}

int ServerProcess::WaitExit(int timeout_ms) {
  if (pid_ <= 0) return -1;
  const int status = Wait(timeout_ms);
  if (status == -1) Kill9();
  return status;
}

void ServerProcess::Kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  Wait(10000);
}

int ServerProcess::Wait(int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 10) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

long ServerProcess::RssKiB() const {
  if (pid_ <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      long kib = -1;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

namespace {
// Fields 3 to `last` of /proc/<pid>/stat (fields[i - 3] is field i, as
// proc(5) numbers them); empty if unreadable.
std::vector<std::string> StatFields(pid_t pid, int last) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces, hence the ')').
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(stat.substr(close + 2));
  std::vector<std::string> fields;
  std::string f;
  for (int i = 3; i <= last && rest >> f; ++i) fields.push_back(f);
  return fields;
}
}  // namespace

double ServerProcess::CpuSeconds() const {
  if (pid_ <= 0) return -1;
  const std::vector<std::string> f = StatFields(pid_, 15);
  if (f.size() < 13) return -1;
  const double utime = std::stod(f[14 - 3]), stime = std::stod(f[15 - 3]);
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long long ServerProcess::MinorFaults() const {
  if (pid_ <= 0) return -1;
  const std::vector<std::string> f = StatFields(pid_, 10);
  return f.size() < 8 ? -1 : std::stoll(f[10 - 3]);
}

std::string ServerProcess::Log() const {
  std::ifstream in(dir_ + "/fencedkv-server.INFO");
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

RespTestClient::RespTestClient(int port, int timeout_ms,
                               const std::string& host, int rcvbuf_bytes) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  if (rcvbuf_bytes > 0) {
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof(rcvbuf_bytes));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  const timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  connected_ =
      connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

RespTestClient::~RespTestClient() { Close(); }

void RespTestClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

size_t RespTestClient::SendRaw(const std::string& bytes) {
  size_t off = 0;
  while (fd_ >= 0 && off < bytes.size()) {
    const ssize_t n =
        send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  return off;
}

std::string RespTestClient::Encode(const std::vector<std::string>& words) {
  std::string out = "*" + std::to_string(words.size()) + "\r\n";
  for (const auto& w : words)
    out += "$" + std::to_string(w.size()) + "\r\n" + w + "\r\n";
  return out;
}

std::string RespTestClient::Read() {
  std::string line, error;
  if (!ReadLine(&line, &error)) return error;
  const char t = line[0];
  const std::string rest = line.substr(1);
  if (t == '+' || t == '-' || t == ':') return line;
  if (t == '$') {
    const long len = std::stol(rest);
    if (len < 0) return "$nil";
    std::string body;
    if (!ReadN(static_cast<size_t>(len) + 2, &body, &error)) return error;
    return "$" + body.substr(0, static_cast<size_t>(len));
  }
  if (t == '*') {
    const long n = std::stol(rest);
    if (n < 0) return "*nil";
    std::string out = "*[";
    for (long i = 0; i < n; ++i) out += (i ? "," : "") + Read();
    return out + "]";
  }
  return "?" + line;
}

std::string RespTestClient::ReadAll() {
  while (Fill() > 0) {
  }
  std::string out;
  out.swap(buf_);
  return out;
}

bool RespTestClient::PeerClosed() {
  int r;
  while ((r = Fill()) > 0) {
  }
  return r == 0;
}

int RespTestClient::Fill() {
  if (fd_ < 0) return 0;
  char buf[65536];
  const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
  if (n > 0) {
    buf_.append(buf, static_cast<size_t>(n));
    return 1;
  }
  if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return 0;
  return -1;
}

bool RespTestClient::ReadLine(std::string* line, std::string* error) {
  size_t pos;
  while ((pos = buf_.find("\r\n")) == std::string::npos) {
    const int r = Fill();
    if (r <= 0) {
      *error = r == 0 ? "EOF" : "TIMEOUT";
      return false;
    }
  }
  *line = buf_.substr(0, pos);
  buf_.erase(0, pos + 2);
  return true;
}

bool RespTestClient::ReadN(size_t n, std::string* out, std::string* error) {
  while (buf_.size() < n) {
    const int r = Fill();
    if (r <= 0) {
      *error = r == 0 ? "EOF" : "TIMEOUT";
      return false;
    }
  }
  *out = buf_.substr(0, n);
  buf_.erase(0, n);
  return true;
}

std::map<std::string, std::string> InfoFields(int port,
                                              const std::string& section,
                                              int timeout_ms) {
  RespTestClient c(port, timeout_ms);
  const std::string text = c.Call({"INFO", section});
  std::map<std::string, std::string> out;
  if (text.empty() || text[0] != '$') return out;
  std::istringstream in(text.substr(1));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      out[line.substr(0, colon)] = line.substr(colon + 1);
    }
  }
  return out;
}

bool WaitUntil(const std::function<bool()>& pred, int timeout_ms) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

void StopProcess(pid_t pid) {
  kill(pid, SIGSTOP);
  WaitUntil(
      [&] {
        const std::string dir = "/proc/" + std::to_string(pid) + "/task";
        DIR* d = opendir(dir.c_str());
        if (d == nullptr) return false;
        bool all = true;
        while (dirent* e = readdir(d)) {
          if (e->d_name[0] == '.') continue;
          std::ifstream in(dir + "/" + e->d_name + "/stat");
          std::string stat((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
          const size_t close = stat.rfind(')');
          if (close == std::string::npos || close + 2 >= stat.size() ||
              stat[close + 2] != 'T') {
            all = false;
          }
        }
        closedir(d);
        return all;
      },
      5000);
}

std::pair<int, std::string> RunCommand(const std::string& command) {
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return {-1, ""};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace test
}  // namespace fencedkv
