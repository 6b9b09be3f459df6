// Copyright (c) fencedkv authors.
//
// wait_bench: a redis-benchmark-like load of SETs where every SET may be
// followed by `WAIT <replicas> <timeout>`, which redis-benchmark cannot send.
// It is how Redis is made to acknowledge a write only once a replica has it,
// the nearest thing Redis has to fencedkv's --min_insync_replicas, so
// tools/replication_bench.sh compares the two with the same client.
//
// One thread, epoll, --clients connections; each keeps --pipeline requests
// in flight (a request is the SET and, with --wait_replicas, its WAIT) and
// sends the next window when every reply of the last one is in, as
// redis-benchmark -P does. Keys are key:<12 digits> drawn from --keyspace.
// Any error reply, or a WAIT that reports fewer replicas than asked, fails
// the run (exit 1): a throughput is printed only for writes that were
// acknowledged as asked. A benchmark tool, not a test.

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gflags/gflags.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

DEFINE_string(host, "127.0.0.1", "Server address (IPv4)");
DEFINE_int32(port, 6379, "Server port");
DEFINE_int32(clients, 50, "Connections");
DEFINE_int64(requests, 100000, "SETs in all");
DEFINE_int32(pipeline, 1, "Requests in flight per connection (-P)");
DEFINE_int32(wait_replicas, 0,
             "Follow every SET with WAIT <this> <--wait_timeout_ms> "
             "(0: no WAIT)");
DEFINE_int32(wait_timeout_ms, 0, "WAIT's timeout (0: none, as WAIT 1 0)");
DEFINE_int32(value_size, 100, "Bytes per value");
DEFINE_int64(keyspace, 1000000, "Keys drawn from key:000000000000..");
DEFINE_string(fence, "", "Append FENCE <this> to every SET (fencedkv)");
DEFINE_bool(csv, false, "Print one CSV line: \"requests_per_sec\",\"N\"");

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "wait_bench: %s\n", what.c_str());
  std::exit(1);
}

void AppendBulk(std::string* out, const std::string& s) {
  *out += '$';
  *out += std::to_string(s.size());
  *out += "\r\n";
  *out += s;
  *out += "\r\n";
}

struct Conn {
  int fd = -1;
  std::string out;
  size_t sent = 0;
  std::string in;
  size_t parsed = 0;
  int64_t replies_owed = 0;  // replies of the current window still to come
  bool wait_next = false;    // the next reply answers a WAIT
  bool want_out = false;     // registered for EPOLLOUT
};

// Consumes complete replies from c->in; returns false on a reply that fails
// the run (with its text in *why).
bool Consume(Conn* c, std::string* why) {
  while (c->replies_owed > 0) {
    const size_t eol = c->in.find("\r\n", c->parsed);
    if (eol == std::string::npos) return true;
    const char type = c->in[c->parsed];
    const std::string line = c->in.substr(c->parsed + 1, eol - c->parsed - 1);
    size_t end = eol + 2;
    if (type == '$') {
      const long long len = std::stoll(line);
      if (len >= 0) {
        end += static_cast<size_t>(len) + 2;
        if (c->in.size() < end) return true;
      }
    } else if (type == '-') {
      *why = "error reply: -" + line;
      return false;
    } else if (type == ':' && c->wait_next) {
      if (std::stoll(line) < FLAGS_wait_replicas) {
        *why = "WAIT reached " + line + " replica(s), asked for " +
               std::to_string(FLAGS_wait_replicas);
        return false;
      }
    } else if (type != '+' && type != ':') {
      *why = std::string("unexpected reply type '") + type + "'";
      return false;
    }
    if (FLAGS_wait_replicas > 0) c->wait_next = !c->wait_next;
    c->parsed = end;
    --c->replies_owed;
  }
  c->in.erase(0, c->parsed);
  c->parsed = 0;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "SET load with an optional WAIT after each SET (what redis-benchmark "
      "cannot send)\nusage: wait_bench --port=P [--pipeline=16] "
      "[--wait_replicas=1] [--fence=1] ...");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) Die(std::string("unexpected argument: ") + argv[1]);
  if (FLAGS_clients < 1 || FLAGS_clients > 10000) Die("--clients: 1..10000");
  if (FLAGS_pipeline < 1 || FLAGS_pipeline > 10000) {
    Die("--pipeline: 1..10000");
  }
  if (FLAGS_requests < 1) Die("--requests must be positive");
  if (FLAGS_wait_replicas < 0) Die("--wait_replicas must be >= 0");
  if (FLAGS_value_size < 0 || FLAGS_value_size > (64 << 20)) {
    Die("--value_size: 0..64 MiB");
  }
  if (FLAGS_keyspace < 1) Die("--keyspace must be positive");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(FLAGS_port));
  if (inet_pton(AF_INET, FLAGS_host.c_str(), &addr.sin_addr) != 1) {
    Die("--host must be an IPv4 address: " + FLAGS_host);
  }

  const std::string value(static_cast<size_t>(FLAGS_value_size), 'v');
  const std::string wait_cmd =
      FLAGS_wait_replicas == 0
          ? std::string()
          : "*3\r\n$4\r\nWAIT\r\n$" +
                std::to_string(std::to_string(FLAGS_wait_replicas).size()) +
                "\r\n" + std::to_string(FLAGS_wait_replicas) + "\r\n$" +
                std::to_string(std::to_string(FLAGS_wait_timeout_ms).size()) +
                "\r\n" + std::to_string(FLAGS_wait_timeout_ms) + "\r\n";
  const int per_request = FLAGS_wait_replicas > 0 ? 2 : 1;
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> pick(0, FLAGS_keyspace - 1);
  int64_t to_issue = FLAGS_requests;
  auto fill_window = [&](Conn* c) {
    const int64_t n = std::min<int64_t>(FLAGS_pipeline, to_issue);
    to_issue -= n;
    c->out.clear();
    c->sent = 0;
    char key[32];
    for (int64_t i = 0; i < n; ++i) {
      std::snprintf(key, sizeof(key), "key:%012" PRId64, pick(rng));
      c->out += FLAGS_fence.empty() ? "*3\r\n" : "*5\r\n";
      AppendBulk(&c->out, "SET");
      AppendBulk(&c->out, key);
      AppendBulk(&c->out, value);
      if (!FLAGS_fence.empty()) {
        AppendBulk(&c->out, "FENCE");
        AppendBulk(&c->out, FLAGS_fence);
      }
      c->out += wait_cmd;
    }
    c->replies_owed = n * per_request;
    return n;
  };

  const int ep = epoll_create1(0);
  if (ep < 0) Die(std::string("epoll_create1: ") + std::strerror(errno));
  // Sends what it can; asks for EPOLLOUT only while output is left.
  auto pump = [&](Conn* c, size_t i) {
    while (c->sent < c->out.size()) {
      const ssize_t w = send(c->fd, c->out.data() + c->sent,
                             c->out.size() - c->sent, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) break;
      if (w < 0) Die(std::string("send: ") + std::strerror(errno));
      c->sent += static_cast<size_t>(w);
    }
    const bool want_out = c->sent < c->out.size();
    if (want_out == c->want_out) return;
    c->want_out = want_out;
    epoll_event ev{};
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
    ev.data.u64 = i;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
      Die(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  };
  std::vector<Conn> conns(static_cast<size_t>(FLAGS_clients));
  for (size_t i = 0; i < conns.size(); ++i) {
    Conn& c = conns[i];
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c.fd < 0) Die(std::string("socket: ") + std::strerror(errno));
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
        errno != EINPROGRESS) {
      Die("connect to " + FLAGS_host + ":" + std::to_string(FLAGS_port) + ": " +
          std::strerror(errno));
    }
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;  // EPOLLOUT: the connect completed
    ev.data.u64 = i;
    c.want_out = true;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev) != 0) {
      Die(std::string("epoll_ctl: ") + std::strerror(errno));
    }
  }

  const auto start = std::chrono::steady_clock::now();
  int active = 0;
  for (Conn& c : conns) {
    if (fill_window(&c) > 0) {
      ++active;
    } else {
      // No work for it (fewer requests than clients x pipeline): out of
      // the poll set, or its EPOLLOUT would wake every wait.
      epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    }
  }
  std::vector<epoll_event> events(conns.size());
  std::vector<char> buf(1 << 16);
  std::string why;
  while (active > 0) {
    const int n =
        epoll_wait(ep, events.data(), static_cast<int>(events.size()), 30000);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Die(std::string("epoll_wait: ") + std::strerror(errno));
    if (n == 0) Die("no reply for 30 s");
    for (int k = 0; k < n; ++k) {
      const size_t i = events[k].data.u64;
      Conn& c = conns[i];
      if (c.replies_owed == 0) continue;
      if (events[k].events & EPOLLERR) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        Die("connection to " + FLAGS_host + ":" + std::to_string(FLAGS_port) +
            ": " + std::strerror(err));
      }
      if (events[k].events & EPOLLOUT) pump(&c, i);
      if (!(events[k].events & (EPOLLIN | EPOLLHUP))) continue;
      const ssize_t r = recv(c.fd, buf.data(), buf.size(), 0);
      if (r == 0) Die("the server closed a connection");
      if (r < 0 && errno != EAGAIN && errno != EINTR) {
        Die(std::string("recv: ") + std::strerror(errno));
      }
      if (r > 0) c.in.append(buf.data(), static_cast<size_t>(r));
      if (!Consume(&c, &why)) Die(why);
      if (c.replies_owed > 0) continue;
      if (fill_window(&c) == 0) {
        --active;
        epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
      } else {
        pump(&c, i);
      }
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const double rps = static_cast<double>(FLAGS_requests) / secs;
  if (FLAGS_csv) {
    std::printf("\"requests_per_sec\",\"%.2f\"\n", rps);
  } else {
    std::printf(
        "%" PRId64 " SETs%s in %.2f s: %.0f requests/s\n", FLAGS_requests,
        FLAGS_wait_replicas > 0 ? " each followed by WAIT" : "", secs, rps);
  }
  for (Conn& c : conns) close(c.fd);
  close(ep);
  return 0;
}
