// Copyright (c) fencedkv authors.
//
// Loop: one io thread of the server, running its own Asio io_context. Every
// handler of a connection runs on that connection's loop, so they never run
// concurrently (no strand needed), and the fenced writes its connections
// parsed in one pass are flushed as one group (Server::Impl::Flush), or in
// parts while replies wait for replicas (Server::Impl::AddWriter).
//
// Not thread-safe: everything here but `io`, `thread` and `decided` is
// touched only on the loop's own thread (Server::Impl sets it up before the
// thread starts and joins the thread before tearing it down).

#ifndef FENCEDKV_SERVER_LOOP_H_
#define FENCEDKV_SERVER_LOOP_H_

#define ASIO_STANDALONE
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "sync_gather.h"
#include "util/mutexlock.h"
#include "util/thread_annotations.h"

namespace fencedkv {
namespace server {

class Connection;

struct Loop {
  explicit Loop(std::chrono::microseconds sync_gather_cap)
      : io(1), gather(sync_gather_cap) {}
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>>
      work;
  std::thread thread;
  // Connections with grouped writes for this pass's flush (or its next
  // part).
  std::vector<std::shared_ptr<Connection>> writers;
  bool flush_posted = false;
  // Grouped writes are being written here and their completions run
  // (Server::Impl::WriteWriters): a connection they continue waits for the
  // next write rather than starting a part inside this one.
  bool writing_part = false;
  size_t writer_batches = 0;  // the writers' batches in all
  // With --sync: whether to look for more writes before writing the group.
  SyncGather gather;
  // Connections whose collected GETs wait for one shared trip to the
  // database thread (Server::Impl::FlushReads).
  std::vector<std::shared_ptr<Connection>> readers;
  bool reads_posted = false;
  // Replies the commit tracker decided on another thread (a replica link's
  // acknowledgement, the coordinator's tick): queued here and handed to the
  // loop by one post for all of them (Connection::HandOverDecided). An
  // acknowledgement decides the held replies of every connection that
  // wrote in the groups it covers; a post per connection cost the loop a
  // wakeup, a lock of its queue and an allocation each.
  struct Decided {
    Mutex mu;
    std::vector<std::pair<std::shared_ptr<Connection>, std::string>> items
        GUARDED_BY(mu);
    bool posted GUARDED_BY(mu) = false;
  };
  Decided decided;
  // This loop's connections, for the timeout checks (expired entries are
  // dropped as they are met).
  std::vector<std::weak_ptr<Connection>> conns;
  // Closes connections past idle_timeout or auth_timeout, if either is set.
  // (Timers after `io`, so they are destroyed first.)
  std::optional<asio::steady_timer> timeouts;
  // Loop 0 only: releases SCAN iterators parked too long.
  std::optional<asio::steady_timer> sweep;
  // Connections blocked in WAIT, whose sockets the loop does not read:
  // checked every few hundred ms for a peer that closed
  // (Connection::WatchHangups), while any is listed.
  std::vector<std::weak_ptr<Connection>> waiting;
  std::optional<asio::steady_timer> hangups;
  bool hangups_armed = false;
};

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_LOOP_H_
