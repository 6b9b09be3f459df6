// Copyright (c) fencedkv authors.
//
// fencedkv-server: every step returns a Status; a failed step logs and exits
// non-zero; cleanup is RAII. The port is bound before the DB is opened, so a
// taken port fails fast without touching the data.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <malloc.h>
#include <rocksdb/statistics.h>
#include <signal.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "fencedkv/db.h"
#include "fencedkv/lease.h"
#include "fencedkv/version.h"

#include "acl.h"
#include "command_table.h"
#include "db_worker.h"
#include "etcd_client.h"
#include "etcd_revision.h"
#include "lease_slot.h"
#include "metrics.h"
#include "process_memory.h"
#include "repl_stream.h"
#include "replication.h"
#include "server.h"
#include "server_flags.h"
#include "util/help_flags.h"
#include "util/open_files_limit.h"
#include "util/thread_name.h"

namespace {

// A replica's full copy is ready: the primary to follow after the restart.
std::mutex g_restart_mu;
std::string g_restart_primary;
bool g_restart = false;

// --malloc_hugepages: executes the server again with glibc's huge-page
// tunables added to GLIBC_TUNABLES, once: each one not named there already
// (the user's own choice), not if this run is the re-executed one
// (FENCEDKV_HUGEPAGES_EXEC, kept for a later restart's exec too), and not
// in glibc's secure mode (setuid, file capabilities), where glibc drops
// tunables and every run would find them missing again. If execv fails, the
// environment is put back and the server goes on with the kernel's pages.
//  - glibc.malloc.hugetlb=1: glibc asks for transparent huge pages
//    (madvise) wherever it maps or extends a heap.
//  - glibc.malloc.arena_max=1: every thread allocates from the main heap.
//    glibc gives a thread's own heap (an "arena") huge pages only for the
//    part it maps first, not for what it grows into later; the database
//    thread's value cache and memtable entries grew there in 4 KiB pages,
//    each one a page fault on first touch (24,000 per 400k SETs, about a
//    fifth of that thread's CPU; with one heap, 72). Small blocks still
//    come from each thread's own cache (glibc's tcache) without a lock.
void UseHugePages(const std::vector<std::string>& args) {
  static constexpr const char* kTunables[] = {"glibc.malloc.hugetlb=1",
                                              "glibc.malloc.arena_max=1"};
  static constexpr char kMarker[] = "FENCEDKV_HUGEPAGES_EXEC";
  if (getauxval(AT_SECURE) != 0 || std::getenv(kMarker) != nullptr) return;
  const char* current = std::getenv("GLIBC_TUNABLES");
  const std::string before = current != nullptr ? current : "";
  std::string tunables = before;
  for (const char* tunable : kTunables) {
    const std::string name(tunable, std::strchr(tunable, '=') + 1);
    if (before.find(name) != std::string::npos) continue;  // the user's
    if (!tunables.empty()) tunables += ':';
    tunables += tunable;
  }
  if (tunables == before) return;
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0 ||
      setenv(kMarker, "1", 1) != 0) {
    return;
  }
  std::vector<char*> cargs;
  cargs.reserve(args.size() + 1);
  for (const std::string& a : args) {
    cargs.push_back(const_cast<char*>(a.c_str()));
  }
  cargs.push_back(nullptr);
  execv("/proc/self/exe", cargs.data());
  const int err = errno;
  if (current == nullptr) {
    unsetenv("GLIBC_TUNABLES");
  } else {
    setenv("GLIBC_TUNABLES", before.c_str(), 1);
  }
  unsetenv(kMarker);
  std::fprintf(stderr,
               "fencedkv-server: --malloc_hugepages: execv failed (%s); going "
               "on without huge pages\n",
               std::strerror(err));
}

// --malloc_retain_mb (server_flags.cc says why): glibc's thresholds set
// once, before any thread starts. Measured on the 2-core test machine:
// page faults per 1,000 SETs from 101 to 1 at -P 1 --sync and from 73 to
// 37 at -P 16, server CPU per SET 7% and 11% lower (medians of 4 and 3
// interleaved runs).
void RetainFreedMemory(int64_t mib) {
  if (mib <= 0) return;
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(mib << 20));  // <= 2047 MiB
  mallopt(M_TOP_PAD, 16 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
}

// --malloc_prefault_mb (server_flags.cc says why): the heap grown by that
// much and every page of it touched, then freed, before any thread starts.
// The blocks (their list reserved first, so nothing lands between them)
// merge with each other and with the heap's top when freed, and glibc
// keeps that top while it is under --malloc_retain_mb, so later
// allocations are carved from pages that are already there. The top also
// holds RetainFreedMemory's 16 MiB pad, up to a huge page of alignment and
// what was free before: main keeps the prefault kHeapSlackMb under the
// retained size. It is glibc's main heap: other threads allocate from it
// only with one heap (glibc.malloc.arena_max=1, OneHeap below). A
// sanitizer's allocator has no such heap: nothing is done under one.
constexpr int64_t kHeapSlackMb = 32;
void PrefaultHeap(int64_t mib) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  mib = 0;
#endif
  if (mib <= 0) return;
  constexpr size_t kBlock = 16 << 20;  // under the 32 MiB mapping threshold
  const size_t total = static_cast<size_t>(mib) << 20;
  const long page = sysconf(_SC_PAGESIZE);
  const size_t step = page > 0 ? static_cast<size_t>(page) : 4096;
  std::vector<char*> blocks;
  blocks.reserve(total / kBlock + 1);
  for (size_t done = 0; done < total; done += kBlock) {
    const size_t size = std::min(kBlock, total - done);
    char* block = static_cast<char*>(std::malloc(size));
    if (block == nullptr) break;
    // volatile: the stores are the point, though nothing reads them.
    volatile char* touch = block;
    for (size_t at = 0; at < size; at += step) touch[at] = 0;
    blocks.push_back(block);
  }
  for (char* block : blocks) std::free(block);
}

// Whether every thread allocates from the main heap: GLIBC_TUNABLES names
// glibc.malloc.arena_max=1 (--malloc_hugepages sets it; a user may too),
// and glibc read it (not in secure mode, where it drops tunables).
bool OneHeap() {
  if (getauxval(AT_SECURE) != 0) return false;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables == nullptr) return false;
  const std::string all = std::string(":") + tunables + ":";
  return all.find(":glibc.malloc.arena_max=1:") != std::string::npos;
}

int Fail(const char* step, const fencedkv::Status& s) {
  LOG(ERROR) << step << ": " << s.ToString();
  std::fprintf(stderr, "fencedkv-server: %s: %s\n", step, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Kept for a restart on a replica's full copy (the same flags again).
  const std::vector<std::string> original_args(argv, argv + argc);
  // Executed again through /proc/self/exe (--malloc_hugepages, a replica's
  // restart onto its full copy), the process would be called "exe" in ps,
  // top and pkill: it takes its program's name back (the kernel keeps 15
  // characters), before any thread starts and inherits the name.
  if (argc > 0 && argv[0] != nullptr) {
    const char* slash = std::strrchr(argv[0], '/');
    fencedkv::SetThreadName(slash != nullptr ? slash + 1 : argv[0]);
  }
  FLAGS_logtostderr = true;  // glog: overridable on the command line
  gflags::SetUsageMessage(
      "fencedkv-server: a Redis-protocol key-value server with fencing tokens "
      "and a built-in lease service.\n"
      "  fencedkv-server --db=DIR [--port=7379] [--bind=127.0.0.1] ...\n"
      "Writes carry FENCE <token>: SET k v FENCE 7; stale tokens get -STALE.");
  gflags::SetVersionString(FENCEDKV_VERSION_STRING);
  fencedkv::NarrowHelpToModule(argc, argv, "server_flags");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) {
    std::fprintf(stderr,
                 "fencedkv-server: unexpected argument '%s' (see --help)\n",
                 argv[1]);
    return 1;
  }
  // Touched heap that the retained free memory cannot hold would be given
  // back at the first free (server_flags.cc: --malloc_prefault_mb).
  int64_t prefault_mb = FLAGS_malloc_prefault_mb;
  if (prefault_mb > 0 && prefault_mb + kHeapSlackMb > FLAGS_malloc_retain_mb) {
    std::fprintf(stderr,
                 "fencedkv-server: --malloc_prefault_mb=%lld needs "
                 "--malloc_retain_mb of at least %lld (it is %lld): the heap "
                 "would give the touched memory back at once\n",
                 static_cast<long long>(prefault_mb),
                 static_cast<long long>(prefault_mb) + kHeapSlackMb,
                 static_cast<long long>(FLAGS_malloc_retain_mb));
    return 1;
  }
  if (FLAGS_malloc_hugepages) UseHugePages(original_args);
  // The default: only where every thread allocates from the heap it warms
  // (else the database thread's own heap grows cold and the prefault is
  // only resident memory), and within an eighth of the memory the process
  // may have (a container's limit), so it cannot push a small one over.
  // (Read once: --maxmemory_clients' default is a quarter of it.)
  const size_t available_memory = fencedkv::server::AvailableMemory();
  if (prefault_mb < 0 && !OneHeap()) prefault_mb = 0;
  if (prefault_mb < 0) {
    const auto eighth = static_cast<int64_t>(available_memory >> 23);
    prefault_mb = std::max<int64_t>(
        0, std::min({FLAGS_malloc_retain_mb * 3 / 4,
                     FLAGS_malloc_retain_mb - kHeapSlackMb, eighth}));
  }
  RetainFreedMemory(FLAGS_malloc_retain_mb);
  PrefaultHeap(prefault_mb);
  google::InitGoogleLogging(argv[0]);
  // The address others know this server by (--announce_addr, parsed once
  // here; else --bind and the port it listens on), checked before anything
  // starts: 0.0.0.0 in etcd's record would send every replica and every
  // Sentinel client to its own machine.
  std::string announce_host;
  int announce_port = 0;
  if (!FLAGS_announce_addr.empty() &&
      (!fencedkv::server::SplitHostPort(FLAGS_announce_addr, &announce_host,
                                        &announce_port) ||
       fencedkv::server::IsWildcardHost(announce_host))) {
    return Fail("flags", fencedkv::Status::InvalidArgument(
                             "--announce_addr=" + FLAGS_announce_addr +
                             " is not host:port of one host"));
  }
  if (!FLAGS_shard.empty() && FLAGS_announce_addr.empty() &&
      fencedkv::server::IsWildcardHost(FLAGS_bind)) {
    return Fail("flags",
                fencedkv::Status::InvalidArgument(
                    "--bind=" + FLAGS_bind +
                    " names no host that others could reach: with --shard "
                    "set --announce_addr=host:port (the address replicas "
                    "and clients connect to)"));
  }
  // Flags that need one another, checked before anything is opened: a
  // start refused later had already created the database, written a
  // promotion into REPLICATION (its epoch list is bounded) and flushed.
  std::string metrics_host;  // --metrics_bind, resolved
  {
    const bool etcd_endpoints =
        !fencedkv::server::SplitEtcdEndpoints(FLAGS_etcd_endpoints).empty();
    std::string host;
    int port = 0;
    const char* bad = nullptr;
    std::string why;
    if (!FLAGS_shard.empty() && !FLAGS_replicaof.empty()) {
      bad = "replication";
      why = "--shard (etcd mode) and --replicaof exclude each other";
    } else if (FLAGS_min_insync_replicas > FLAGS_max_replicas + 1) {
      bad = "replication";
      why =
          "--min_insync_replicas=" + std::to_string(FLAGS_min_insync_replicas) +
          " can never be met with --max_replicas=" +
          std::to_string(FLAGS_max_replicas) +
          " (the primary and its replicas): every write would be refused";
    } else if (!FLAGS_masteruser.empty() && FLAGS_masterauth.empty()) {
      bad = "replication";
      why = "--masteruser goes with --masterauth (its password)";
    } else if (!FLAGS_shard.empty() && !etcd_endpoints) {
      bad = "replication";
      why = "--shard needs --etcd_endpoints";
    } else if (FLAGS_token_source == "etcd" && !etcd_endpoints) {
      bad = "token source";
      why = "--token_source=etcd needs --etcd_endpoints";
    } else if (!FLAGS_replicaof.empty() &&
               !fencedkv::server::IsReplicaOfNone(FLAGS_replicaof) &&
               !fencedkv::server::SplitHostPort(FLAGS_replicaof, &host,
                                                &port)) {
      bad = "replication";
      why = "--replicaof=" + FLAGS_replicaof + " is not host:port (or none)";
    }
    if (bad != nullptr) {
      return Fail(bad, fencedkv::Status::InvalidArgument(why));
    }
    if (FLAGS_metrics_port > 0) {
      // Resolved now, once: a name that stops resolving later cannot fail
      // the start after the database opened.
      const fencedkv::Status ms = fencedkv::server::ResolveMetricsBind(
          FLAGS_metrics_bind, &metrics_host);
      if (!ms.ok()) return Fail("metrics", ms);
    }
    // The port file is written once the server listens: that its directory
    // takes a file is checked now, before anything is opened (a failure
    // then, with the loops, replication and the database running, has no
    // clean way out).
    if (!FLAGS_port_file.empty()) {
      const std::string tmp = FLAGS_port_file + ".tmp";
      const int fd =
          open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        return Fail("port file",
                    fencedkv::Status::IOError(
                        "cannot write --port_file " + FLAGS_port_file,
                        std::strerror(errno)));
      }
      close(fd);
      unlink(tmp.c_str());
    }
  }
  LOG(INFO) << "fencedkv-server " << FENCEDKV_VERSION_STRING << " (RocksDB "
            << fencedkv::RocksDBVersion() << ")";

  // Signals are taken by sigwait below, never by a handler: block them before
  // any thread starts so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // a replica's full copy is ready: restart
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // As Redis: the soft open files limit up to the hard one, so that
  // --maxclients fits if it can (Server::Start caps it otherwise).
  rlim_t soft = 0, hard = 0;
  if (fencedkv::RaiseOpenFilesLimit(&soft, &hard)) {
    LOG(INFO) << "open files limit raised from " << soft << " to " << hard;
  }

  fencedkv::server::ServerOptions so;
  so.bind = FLAGS_bind;
  so.port = FLAGS_port;
  // Half the cores: the rest go to the database thread, RocksDB's flushes
  // and compactions, and (in benchmarks) the clients. On 2 cores one loop
  // beat two at redis-benchmark -P 1 (SET and GET), and at -P 16 one loop
  // plus the database thread was about even with two.
  so.io_threads = FLAGS_io_threads > 0
                      ? FLAGS_io_threads
                      : std::max(1u, std::thread::hardware_concurrency() / 2);
  fencedkv::Status s = fencedkv::server::ResolveRequirepass(&so.requirepass);
  if (!s.ok()) return Fail("requirepass", s);
  if (!FLAGS_aclfile.empty()) {
    s = fencedkv::server::Acl::LoadFile(FLAGS_aclfile, so.requirepass, &so.acl);
  } else {
    s = fencedkv::server::Acl::Parse("", "", so.requirepass, &so.acl);
  }
  if (!s.ok()) return Fail("aclfile", s);
  so.maxclients = static_cast<size_t>(FLAGS_maxclients);
  so.limits.max_request_bytes = static_cast<size_t>(FLAGS_max_request_bytes);
  so.max_reply_bytes = static_cast<size_t>(FLAGS_max_reply_bytes);
  so.max_multi_commands = static_cast<size_t>(FLAGS_max_multi_commands);
  so.max_multi_bytes = static_cast<size_t>(FLAGS_max_multi_bytes);
  if (FLAGS_maxmemory_clients >= 0) {
    so.maxmemory_clients = static_cast<size_t>(FLAGS_maxmemory_clients);
  } else {  // a quarter of the memory this process may have
    so.maxmemory_clients = available_memory / 4;
  }
  so.idle_timeout = std::chrono::seconds(FLAGS_timeout);
  so.tcp_keepalive_s = FLAGS_tcp_keepalive;
  so.auth_timeout = std::chrono::seconds(FLAGS_auth_timeout);
  so.sync = FLAGS_sync;
  so.sync_gather = std::chrono::microseconds(FLAGS_sync_gather_us);
  so.allow_unfenced = FLAGS_allow_unfenced;
  so.slowlog_log_slower_than = FLAGS_slowlog_log_slower_than;
  so.slowlog_max_len = static_cast<size_t>(FLAGS_slowlog_max_len);
  // SHUTDOWN takes the SIGTERM path: the sigwait below.
  so.on_shutdown = [] { kill(getpid(), SIGTERM); };
  fencedkv::server::Server server(so);
  s = server.Listen();
  if (!s.ok()) return Fail("listen", s);

  // A replica's full copy that arrived before a restart replaces the data.
  s = fencedkv::server::Replication::AdoptFullSync(FLAGS_db);
  if (!s.ok()) return Fail("full sync", s);

  // Manual mode: a server that was a replica (--replicaof or REPLICAOF)
  // when it stopped follows the same primary again, as if started with
  // --replicaof (REPLICATION's follow line; REPLICAOF NO ONE clears it).
  // Started as a primary instead, it would take writes of its own beside
  // its primary's: two primaries of one data set.
  std::string replicaof = FLAGS_replicaof;
  const bool as_primary = fencedkv::server::IsReplicaOfNone(replicaof);
  if (as_primary) replicaof.clear();
  fencedkv::server::ReplState kept;
  s = fencedkv::server::ReplState::Load(FLAGS_db, &kept);
  if (!s.ok()) return Fail("replication state", s);
  // A member of an etcd shard starts only as that shard's member, before
  // its database is opened (ReplState::shard).
  if (!kept.shard.empty() && FLAGS_shard != kept.shard) {
    const std::string& x = kept.shard;
    return Fail(
        "replication",
        fencedkv::Status::InvalidArgument(
            "this database is a member of the etcd shard '" +
            fencedkv::EscapeBytes(x) + "' (REPLICATION in --db): start it " +
            (FLAGS_shard.empty()
                 ? "with --shard=" + fencedkv::EscapeBytes(x) +
                       " and --etcd_endpoints. Without them it would "
                       "promote itself to the epoch etcd gives the "
                       "shard's next primary, and take writes beside it"
                 : "with --shard=" + fencedkv::EscapeBytes(x) + ", not '" +
                       fencedkv::EscapeBytes(FLAGS_shard) + "'") +
            ". To take it out of the shard for good (it keeps its data), "
            "with the server stopped: fencedkv-admin --db=" +
            fencedkv::EscapeBytes(FLAGS_db) + " replication --leave_shard"));
  }
  // A member from before the shard line was kept has none until its first
  // start with --shard. Started without it as a primary, it would promote
  // itself all the same. Its log epoch has no promotion id (etcd numbers
  // epochs without; manual mode gives each promotion one), unlike a manual
  // primary's: that much is refused too, unless --replicaof=none says to
  // make it a primary.
  if (kept.shard.empty() && FLAGS_shard.empty() && !as_primary &&
      FLAGS_replicaof.empty() && kept.follow.empty() && kept.log_epoch > 0 &&
      fencedkv::server::PromotionIdOf(kept.epochs, kept.log_epoch).empty()) {
    return Fail(
        "replication",
        fencedkv::Status::InvalidArgument(
            "this database's replication state (REPLICATION in --db) has "
            "epoch " +
            std::to_string(kept.log_epoch) +
            " without a promotion id: an etcd shard's, or a primary's of an "
            "older build. A shard member starts with its --shard and "
            "--etcd_endpoints: started without them it would promote "
            "itself to the epoch etcd gives the shard's next primary. To "
            "make it a manual-mode primary: --replicaof=none"));
  }
  if (replicaof.empty() && !as_primary && FLAGS_shard.empty()) {
    replicaof = kept.follow;
    if (!replicaof.empty()) {
      LOG(INFO) << "replication: following " << replicaof
                << " again, as before the restart (REPLICAOF NO ONE makes "
                   "this server a primary)";
    }
  }

  fencedkv::Options options;
  options.create_if_missing = true;
  options.wal_retention_mb = static_cast<uint64_t>(FLAGS_wal_retention_mb);
  options.wal_retention_seconds =
      static_cast<uint64_t>(FLAGS_wal_retention_seconds);
  options.log_tail_bytes = static_cast<size_t>(FLAGS_repl_backlog_mb) << 20;
  options.drop_wal_after_damage = FLAGS_drop_wal_after_damage;
  // (With --sync every write is synced: no interval sync is ever due.)
  options.wal_sync_interval_ms =
      static_cast<uint32_t>(FLAGS_wal_sync_interval_ms);
  // A server that starts as a replica (or in etcd mode, where it may be
  // one) writes nothing of its own into the log, from the open on (not even
  // the I/O-error recovery's sentinel): its sequence numbers are the
  // primary's. Promoted, it writes (Replication::BecomePrimary).
  options.log_replica = !replicaof.empty() || !FLAGS_shard.empty();
  // A primary may follow another one later (REPLICAOF) without a reopen:
  // no pipelined writes, whose failed groups take sequence numbers
  // (Options::pipelined_write). Correctness first: with one io loop (the
  // default on 2 cores) SET -P 16 showed no difference (417k with, 408k
  // without, medians, noise); with several loops writing their own groups
  // at once the pipeline may have helped, not measured.
  options.pipelined_write = false;
  options.allow_unfenced = FLAGS_allow_unfenced;
  options.max_token_skew = FLAGS_max_token_skew < 0
                               ? fencedkv::kNoTokenSkewLimit
                               : static_cast<uint64_t>(FLAGS_max_token_skew);
  options.fence_cache_bytes = static_cast<size_t>(FLAGS_fence_cache_bytes);
  options.prefault_fence_cache = FLAGS_fence_cache_prefault;
  options.write_buffer_size = fencedkv::server::WriteBufferSize();
  options.block_cache_size = static_cast<size_t>(FLAGS_block_cache_size);
  options.value_cache_size = static_cast<size_t>(FLAGS_value_cache_size);
  options.memtable = FLAGS_memtable;
  if (FLAGS_rocksdb_statistics) {
    // Tickers only: a few per-core counter increments per operation.
    options.statistics = rocksdb::CreateDBStatistics();
    options.statistics->set_stats_level(
        rocksdb::StatsLevel::kExceptHistogramOrTimers);
  }
  options.fence_domain =
      FLAGS_fence_domain.empty() ? "key" : FLAGS_fence_domain;
  if (!FLAGS_fence_mode.empty()) {
    fencedkv::ParseFenceMode(FLAGS_fence_mode, &options.fence_mode);
  }
  // Unset flags adopt what the database stores; set ones must match it.
  options.adopt_stored_fence_config = true;
  std::unique_ptr<fencedkv::DB> db;
  s = fencedkv::DB::Open(options, FLAGS_db, &db);
  if (!s.ok()) return Fail("open database", s);
  {
    // The engine runs without the fence cache when it cannot map it (a
    // --fence_cache_bytes past what the machine gives): say so, as the
    // cost shows only as slower fenced writes (INFO memory
    // fence_cache_capacity).
    std::string capacity;
    if (FLAGS_fence_cache_bytes > 0 &&
        db->GetProperty("fencedkv.fence-cache-capacity", &capacity) &&
        capacity == "0") {
      LOG(WARNING) << "--fence_cache_bytes=" << FLAGS_fence_cache_bytes
                   << ": no fence cache (it could not be mapped, or it is "
                      "smaller than one bucket per stripe); every fence "
                      "check reads RocksDB";
    }
  }
  if (!FLAGS_fence_domain.empty() &&
      db->GetFenceDomain().ToString() != options.fence_domain) {
    return Fail(
        "open database",
        fencedkv::Status::InvalidArgument(
            "--fence_domain=" + FLAGS_fence_domain + " but the database at " +
                FLAGS_db + " was created with \"" +
                db->GetFenceDomain().ToString() + "\"",
            "changing the domain function would silently break every fence"));
  }
  if (!FLAGS_fence_mode.empty() && db->GetFenceMode() != options.fence_mode) {
    return Fail(
        "open database",
        fencedkv::Status::InvalidArgument(
            "--fence_mode=" + FLAGS_fence_mode + " but the database at " +
            FLAGS_db + " was created with \"" +
            fencedkv::FenceModeName(db->GetFenceMode()) + "\""));
  }
  LOG(INFO) << "database " << FLAGS_db
            << ": fence_domain=" << db->GetFenceDomain().ToString()
            << " fence_mode=" << fencedkv::FenceModeName(db->GetFenceMode())
            << " fence_floor=" << db->GetFenceFloor();

  // The lease service is open while this server is the primary
  // (Replication::Start and REPLICAOF open and close it).
  fencedkv::LeaseOptions lease_options;
  lease_options.max_leases = static_cast<size_t>(FLAGS_max_leases);
  auto leases =
      std::make_unique<fencedkv::server::LeaseSlot>(db.get(), lease_options);

  fencedkv::server::ReplicationOptions ro;
  ro.db_path = FLAGS_db;
  ro.self_addr =
      FLAGS_announce_addr.empty()
          ? fencedkv::server::JoinHostPort(FLAGS_bind, server.port())
          : fencedkv::server::JoinHostPort(announce_host, announce_port);
  ro.masteruser = FLAGS_masteruser;
  ro.masterauth = FLAGS_masterauth;
  ro.sync = FLAGS_sync;
  ro.min_insync_replicas = FLAGS_min_insync_replicas;
  ro.timeout_ms = FLAGS_repl_timeout_ms;
  ro.replica_lag_ms = FLAGS_replica_lag_ms;
  ro.max_replicas = static_cast<size_t>(FLAGS_max_replicas);
  // A frame is one WAL record: a group of batches (at most kMaxGroupBytes,
  // db_worker.h) plus one batch, whose size the request and MULTI limits
  // bound (with per-entry overhead). The primary should run with the same
  // limits.
  ro.max_frame_bytes = static_cast<size_t>(FLAGS_max_request_bytes) +
                       static_cast<size_t>(FLAGS_max_multi_bytes) +
                       fencedkv::server::kMaxGroupBytes + (4 << 20);
  if (!FLAGS_shard.empty()) {
    if (!FLAGS_replicaof.empty()) {
      return Fail("replication", fencedkv::Status::InvalidArgument(
                                     "--shard (etcd mode) and --replicaof "
                                     "exclude each other"));
    }
    ro.etcd_endpoints =
        fencedkv::server::SplitEtcdEndpoints(FLAGS_etcd_endpoints);
    if (ro.etcd_endpoints.empty()) {
      return Fail("replication", fencedkv::Status::InvalidArgument(
                                     "--shard needs --etcd_endpoints"));
    }
    ro.shard = FLAGS_shard;
    ro.etcd_prefix = FLAGS_etcd_prefix;
    ro.etcd_lease_ttl_ms = FLAGS_etcd_lease_ttl_ms;
    // On the etcd thread, which also renews the lease every third of a
    // TTL: a probe takes a quarter of one at most (a loopback connection
    // and its accept take well under a millisecond).
    const auto probe_timeout = std::chrono::milliseconds(
        std::clamp<int64_t>(FLAGS_etcd_lease_ttl_ms / 4, 10, 500));
    ro.reaches_self = [&server, probe_timeout](const std::string& addr) {
      return server.ReachesSelf(addr, probe_timeout);
    };
  }
  // REPLICAOF and --replicaof refuse any address that leads to this
  // server's own listener (localhost, 127.1, 0.0.0.0, ...).
  ro.listen_addr = fencedkv::server::JoinHostPort(FLAGS_bind, server.port());
  ro.restart = [](const std::string& primary) {
    {
      std::lock_guard<std::mutex> lock(g_restart_mu);
      g_restart_primary = primary;
      g_restart = true;
    }
    kill(getpid(), SIGUSR1);
  };
  auto repl = std::make_unique<fencedkv::server::Replication>(ro, db.get(),
                                                              leases.get());
  s = repl->Start(replicaof);
  if (!s.ok()) return Fail("replication", s);

  // With etcd as the token source, the skew guard follows its revision.
  std::unique_ptr<fencedkv::server::EtcdRevisionSource> etcd;
  if (FLAGS_token_source == "etcd") {
    leases->RefuseGrants(
        "LEASE.ACQUIRE and LEASE.RENEW are off with --token_source=etcd: "
        "tokens are etcd's revisions (e.g. etcdctl lock's ETCD_LOCK_REV); "
        "a built-in grant would count as issued for the skew guard");
    fencedkv::server::EtcdRevisionSource::Options eo;
    std::stringstream endpoints(FLAGS_etcd_endpoints);
    for (std::string e; std::getline(endpoints, e, ',');) {
      if (!e.empty()) eo.endpoints.push_back(e);
    }
    if (eo.endpoints.empty()) {
      return Fail("token source",
                  fencedkv::Status::InvalidArgument(
                      "--token_source=etcd needs --etcd_endpoints"));
    }
    eo.refresh = std::chrono::milliseconds(FLAGS_etcd_refresh_ms);
    fencedkv::Status first;
    etcd = fencedkv::server::EtcdRevisionSource::Start(db.get(), eo, &first);
    if (first.ok()) {
      LOG(INFO) << "token source: etcd at revision " << etcd->revision();
    } else {
      LOG(WARNING) << "token source: " << first.ToString()
                   << "; tokens above --max_token_skew are refused until "
                      "etcd answers";
    }
  }

  std::unique_ptr<fencedkv::server::MetricsExporter> metrics;
  if (FLAGS_metrics_port > 0) {
    fencedkv::server::MetricsOptions mo;
    mo.bind = metrics_host;
    mo.port = FLAGS_metrics_port;
    mo.acl = so.acl;
    fencedkv::server::Replication* r = repl.get();
    mo.replication = [r] { return r->Gauges(); };
    s = fencedkv::server::MetricsExporter::Start(
        mo, db.get(), leases.get(), &server.stats(), &server.command_stats(),
        &metrics);
    if (!s.ok()) return Fail("metrics", s);
    LOG(INFO) << "metrics on http://"
              << fencedkv::server::MetricsHostPort(metrics_host,
                                                   metrics->port())
              << "/metrics" << (metrics->asks_auth() ? " (basic auth)" : "");
  }

  s = server.Start(db.get(), leases.get(), repl.get());
  if (!s.ok()) return Fail("start", s);
  if (!FLAGS_port_file.empty()) {
    // Whole or not at all: a reader never sees half a number. Its
    // directory took the file at start; should the write fail now anyway,
    // the server stops as on SIGTERM (a supervisor waiting for the file
    // would wait for ever).
    const std::string tmp = FLAGS_port_file + ".tmp";
    std::ofstream out(tmp, std::ios::trunc);
    out << server.port() << "\n";
    out.close();
    if (!out || std::rename(tmp.c_str(), FLAGS_port_file.c_str()) != 0) {
      LOG(ERROR) << "cannot write --port_file " << FLAGS_port_file << " ("
                 << std::strerror(errno) << "): stopping";
      std::remove(tmp.c_str());
      kill(getpid(), SIGTERM);
    }
  }
  std::printf("fencedkv-server %s ready on %s:%d (db %s)\n",
              FENCEDKV_VERSION_STRING, FLAGS_bind.c_str(), server.port(),
              FLAGS_db.c_str());
  std::fflush(stdout);
  LOG(INFO) << "ready on " << FLAGS_bind << ":" << server.port();

  int sig = 0;
  std::string restart_primary;
  bool restart = false;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) break;
    std::lock_guard<std::mutex> lock(g_restart_mu);
    restart_primary = g_restart_primary;
    restart = g_restart;
    if (restart) break;
  }
  LOG(INFO) << "signal " << sig << ": "
            << (restart ? "restarting on a full copy" : "shutting down");
  repl->Stop();  // links end, WAITs are answered
  server.Stop(std::chrono::milliseconds(FLAGS_shutdown_timeout_ms));
  fencedkv::server::StopBackupJobs();  // before the database closes
  const int port = server.port();
  metrics.reset();
  etcd.reset();
  repl.reset();
  leases.reset();
  db.reset();  // closes RocksDB; everything acknowledged is in the WAL
  if (restart) {
    // The same process (same PID) starts again on the same port, where
    // AdoptFullSync swaps the copy in, and goes on replicating (in etcd
    // mode, etcd's record names the primary again).
    std::vector<std::string> args = original_args;
    if (FLAGS_shard.empty()) args.push_back("--replicaof=" + restart_primary);
    args.push_back("--port=" + std::to_string(port));
    std::vector<char*> cargs;
    cargs.reserve(args.size() + 1);
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    google::FlushLogFiles(google::INFO);
    // glog names its files by the second and PID: the new process must
    // not start in the second this one did, or it finds its file taken.
    if (!FLAGS_logtostderr) {
      std::this_thread::sleep_until(std::chrono::ceil<std::chrono::seconds>(
                                        std::chrono::system_clock::now()) +
                                    std::chrono::milliseconds(10));
    }
    execv("/proc/self/exe", cargs.data());
    return Fail("restart", fencedkv::Status::IOError(std::string("execv: ") +
                                                     std::strerror(errno)));
  }
  LOG(INFO) << "stopped cleanly";
  return 0;
}
