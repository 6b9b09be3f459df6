// Copyright (c) fencedkv authors.

#include "repl_stream.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/sync_point.h"

namespace fencedkv {
namespace server {
namespace {

class ReplSocketTest : public testing::Test {
 protected:
  void TearDown() override {
    SyncPoint::Get()->DisableProcessing();
    SyncPoint::Get()->ClearAllCallbacks();
  }
};

// Replication::StopLinks wakes a link's thread with ShutdownBoth while that
// thread may be closing the same socket (ReplSocket::Close, as its link
// ends). Forced here: the owner closes the socket, and another socket
// takes its descriptor number, in the middle of ShutdownBoth. The shutdown
// must not land on that other socket (in the server: a client's
// connection, a file, another link). Before the fix ShutdownBoth read the
// number, the owner closed it, and shutdown() hit the new socket: its send
// failed (EPIPE).
TEST_F(ReplSocketTest, ShutdownFromAnotherThreadNeverHitsAReusedDescriptor) {
  int link[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link));
  ReplSocket socket(link[0]);
  int other[2] = {-1, -1};
  std::thread owner;
  std::atomic<bool> closed{false};
  std::atomic<int> fired{0};
  SyncPoint::Get()->SetCallback("ReplSocket::ShutdownBoth", [&](void*) {
    if (fired.fetch_add(1) != 0) return;
    owner = std::thread([&] {
      socket.Close();
      closed = true;
    });
    // Close must wait for this shutdown; if it cannot finish within
    // 500 ms, it does (the bounded wait ends, the shutdown goes on).
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!closed.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    // Another socket now: the lowest free number, the closed one's if it
    // was closed.
    if (closed.load()) {
      ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, other));
    }
  });
  SyncPoint::Get()->EnableProcessing();
  socket.ShutdownBoth();
  SyncPoint::Get()->DisableProcessing();
  owner.join();
  EXPECT_EQ(1, fired.load());
  if (other[0] < 0) {
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, other));
  }
  // The other socket still works both ways.
  EXPECT_EQ(1, send(other[0], "x", 1, MSG_NOSIGNAL))
      << "the shutdown hit descriptor " << other[0] << ", now another socket";
  char c = 0;
  EXPECT_EQ(1, recv(other[1], &c, 1, MSG_DONTWAIT));
  // The link's peer saw its end.
  EXPECT_EQ(0, recv(link[1], &c, 1, 0));
  EXPECT_FALSE(socket.open());
  close(other[0]);
  close(other[1]);
  close(link[1]);
}

// Addresses come from the network (a replica's handshake, REPLICAOF) and
// are printed in INFO and ROLE: one that could break a line is refused.
TEST(ReplAddressTest, SplitHostPortTakesHostsAndAddressesOnly) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("db-1.example:7379", &host, &port));
  EXPECT_EQ("db-1.example", host);
  EXPECT_EQ(7379, port);
  ASSERT_TRUE(SplitHostPort("[fe80::1%eth0]:5", &host, &port));
  EXPECT_EQ("fe80::1%eth0", host);
  for (const char* bad : {"x\r\nrole:master:1", "a b:1", "h:0", "h:65536", ":1",
                          "h", "h:1x", "h,ip=1.2.3.4:1"}) {
    EXPECT_FALSE(SplitHostPort(bad, &host, &port)) << bad;
  }
  ASSERT_TRUE(SplitHostPort("::1:7380", &host, &port));  // unbracketed v6
  EXPECT_EQ("::1", host);
  EXPECT_EQ(7380, port);
  EXPECT_FALSE(SplitHostPort("fe80::1", &host, &port));  // not fe80: port 1
  EXPECT_FALSE(SplitHostPort("::1", &host, &port));
  EXPECT_FALSE(SplitHostPort("[db-1]:5", &host, &port));
  EXPECT_EQ("[::1]:7380", NormalizeHostPort("::1:7380"));
  EXPECT_EQ("[::1]:7380", NormalizeHostPort("[::1]:7380"));
  EXPECT_EQ("h:1", NormalizeHostPort("h:1"));
  EXPECT_EQ("not one", NormalizeHostPort("not one"));
  EXPECT_EQ("[::1]:7", JoinHostPort("::1", 7));
  EXPECT_EQ("10.0.0.1:7", JoinHostPort("10.0.0.1", 7));
  for (const char* h : {"0.0.0.0", "::", "::0", "0:0::", "::ffff:0.0.0.0"}) {
    EXPECT_TRUE(IsWildcardHost(h)) << h;
  }
  for (const char* h : {"127.0.0.1", "::1", "db-1"}) {
    EXPECT_FALSE(IsWildcardHost(h)) << h;
  }
  for (const char* h : {"localhost", "127.0.0.2", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"10.0.0.1", "db-1", "0.0.0.0"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

// A loopback TCP connection: a listener bound to `at` (port 0; AF_INET or
// AF_INET6) accepts a ReplSocket's connection to 127.0.0.1. served() is the
// accepted end, -1 if any step failed (error() says which).
class LoopbackConnection {
 public:
  LoopbackConnection(const sockaddr* at, socklen_t len, bool dual_stack) {
    listener_ = socket(at->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int off = 0;
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof(bound);
    if (listener_ < 0 ||
        (dual_stack && setsockopt(listener_, IPPROTO_IPV6, IPV6_V6ONLY, &off,
                                  sizeof(off)) != 0) ||
        bind(listener_, at, len) != 0 || listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&bound),
                    &bound_len) != 0) {
      error_ = std::strerror(errno);
      return;
    }
    const uint16_t port =
        at->sa_family == AF_INET
            ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
            : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port;
    Status s = client_.Connect("127.0.0.1:" + std::to_string(ntohs(port)),
                               std::chrono::milliseconds(2000));
    if (!s.ok()) {
      error_ = s.ToString();
      return;
    }
    served_ = accept(listener_, nullptr, nullptr);
    if (served_ < 0) error_ = std::strerror(errno);
  }
  ~LoopbackConnection() {
    if (served_ >= 0) close(served_);
    if (listener_ >= 0) close(listener_);
  }
  int served() const { return served_; }
  const std::string& error() const { return error_; }

 private:
  int listener_ = -1;
  int served_ = -1;
  ReplSocket client_;
  std::string error_;
};

// A replica bound to 0.0.0.0 announces 0.0.0.0:port: the primary names it
// by the address its connection comes from (two such replicas on two
// machines would otherwise share one name, and one's acknowledgements
// would count for the other). Real loopback TCP.
TEST(ReplAddressTest, AWildcardAnnouncementIsNamedByItsPeer) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  LoopbackConnection c(reinterpret_cast<sockaddr*>(&a), sizeof(a), false);
  ASSERT_GE(c.served(), 0) << c.error();
  const int served = c.served();
  std::string addr;
  ASSERT_TRUE(ReplicaAddress("0.0.0.0:4242", served, &addr));
  EXPECT_EQ("127.0.0.1:4242", addr);
  ASSERT_TRUE(ReplicaAddress("[::]:4243", served, &addr));
  EXPECT_EQ("127.0.0.1:4243", addr);
  ASSERT_TRUE(ReplicaAddress("10.1.2.3:5", served, &addr));
  EXPECT_EQ("10.1.2.3:5", addr);  // announced: taken as said
  // A loopback name from a loopback peer is kept (this machine's own).
  ASSERT_TRUE(ReplicaAddress("localhost:6", served, &addr));
  EXPECT_EQ("localhost:6", addr);
  ASSERT_TRUE(ReplicaAddress("::1:6", served, &addr));
  EXPECT_EQ("[::1]:6", addr);
  EXPECT_FALSE(ReplicaAddress("nothing", served, &addr));
  EXPECT_FALSE(ReplicaAddress("0.0.0.0:4242", -1, &addr));  // no peer
}

// An IPv4 replica reaching a dual-stack socket shows as ::ffff:a.b.c.d: it
// is named a.b.c.d, as a replica on an IPv4 socket would be.
TEST(ReplAddressTest, AMappedIpv4PeerIsNamedByItsIpv4Address) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  ASSERT_EQ(1, inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.sin6_addr));
  LoopbackConnection c(reinterpret_cast<sockaddr*>(&a), sizeof(a), true);
  if (c.served() < 0) GTEST_SKIP() << "no dual-stack loopback: " << c.error();
  std::string addr;
  ASSERT_TRUE(ReplicaAddress("0.0.0.0:4242", c.served(), &addr));
  EXPECT_EQ("127.0.0.1:4242", addr);
}

// A frame that is not a RESP array names its first byte in hex (before:
// its decimal value after "0x": "0x72" for 'H').
TEST(FrameReaderTest, ANonArrayNamesItsFirstByteInHex) {
  FrameReader in(1024);
  in.buffer()->append("HELLO\r\n");
  std::vector<std::string_view> words;
  EXPECT_FALSE(in.Next(&words));
  EXPECT_EQ("not a RESP array (first byte 0x48)", in.error());
  FrameReader low(1024);
  low.buffer()->append("\x01x");
  EXPECT_FALSE(low.Next(&words));
  EXPECT_EQ("not a RESP array (first byte 0x01)", low.error());
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
