// Copyright (c) fencedkv authors.

#include "repl_stream.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
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

}  // namespace
}  // namespace server
}  // namespace fencedkv
