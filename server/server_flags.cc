// Copyright (c) fencedkv authors.

#include "server_flags.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fencedkv/fence_domain.h"
#include "fencedkv/options.h"

#include "acl.h"
#include "util/help_flags.h"

DEFINE_string(bind, "127.0.0.1",
              "Address to listen on. The default serves this machine only; "
              "0.0.0.0 exposes the server (then set --requirepass)");
DEFINE_int32(port, 7379,
             "TCP port for the Redis protocol; 0 picks a free "
             "port (printed on stdout and written to --port_file)");
DEFINE_string(port_file, "",
              "If set, the bound port is written to this file "
              "once the server accepts connections");
DEFINE_string(db, "fencedkv-data",
              "Data directory (created if missing; its parent must exist)");
DEFINE_string(fence_domain, "",
              "Fence domain function used when the database is created: key | "
              "prefix:N | delimiter:C | hashtag. Empty: key for a new "
              "database, the stored one otherwise. A value that differs from "
              "the stored one is refused");
DEFINE_string(fence_mode, "",
              "Acceptance rule used at creation: monotonic (token >= max) | "
              "strict (token > max). Empty: monotonic for a new database, the "
              "stored one otherwise; a different value is refused");
DEFINE_bool(sync, false,
            "fsync the WAL before replying to each write (a "
            "machine crash then loses nothing acknowledged). Fence advances, "
            "floors and lease grants are always synced");
DEFINE_int32(sync_gather_us, 500,
             "With --sync: an event loop may wait up to this many "
             "microseconds for more clients' writes to share one fsync. The "
             "wait ends sooner at the first pass over the sockets that "
             "brings no new write, and lasts no longer than recent synced "
             "writes took (plus the pass under way). 0 = fsync each group "
             "at once, 0..10000");
DEFINE_string(requirepass, "",
              "If set, clients must AUTH with this password (the 'default' "
              "user's). Visible in ps: prefer --requirepass_file or the "
              "FENCEDKV_REQUIREPASS environment variable");
DEFINE_string(requirepass_file, "",
              "A file holding the password (one line; the newline is not part "
              "of it). At most one of --requirepass, --requirepass_file and "
              "FENCEDKV_REQUIREPASS may be set");
DEFINE_string(aclfile, "",
              "Users and their permissions, one per line in Redis ACL syntax "
              "(user NAME on >password ~* +@all -@admin; see README). Without "
              "it, or if it does not define 'default', the default user runs "
              "every command but @admin (FENCE.FLOOR with an argument, "
              "CONFIG, CLIENT LIST, ACL LIST): operators are users with "
              "@admin");
DEFINE_int64(max_token_skew, -1,
             "The token skew guard: refuse (-TOKENSKEW) a write or "
             "FENCE.ADVANCE whose token is more than this above the highest "
             "token issued (INFO fencing: highest_token_issued): with "
             "--token_source=builtin the last token LEASE.ACQUIRE granted "
             "(persisted, so it holds across restarts); with "
             "--token_source=etcd etcd's current revision, learnt every "
             "--etcd_refresh_ms (cover the revisions etcd issues meanwhile). "
             "0 admits only tokens already issued. -1 = off");
DEFINE_string(token_source, "builtin",
              "Where fencing tokens come from, for the skew guard: builtin "
              "(LEASE.ACQUIRE) or etcd (revisions, e.g. etcdctl lock's "
              "ETCD_LOCK_REV; needs --etcd_endpoints; LEASE.ACQUIRE and "
              "LEASE.RENEW are then refused: one issuer)");
DEFINE_string(etcd_endpoints, "",
              "With --token_source=etcd: etcd client URLs, comma-separated "
              "(http://127.0.0.1:2379); asked in turn");
DEFINE_int32(etcd_refresh_ms, 100,
             "With --token_source=etcd: how often the server asks etcd for "
             "its revision (on a thread of its own)");
DEFINE_int64(max_leases, 100000,
             "Most leases on record (held, or expired and not yet reclaimed; "
             "expired ones are reclaimed every second). LEASE.ACQUIRE of a "
             "new name past it gets '-BUSY too many leases'. Each costs about "
             "100 bytes plus its name and holder (1 KiB each at most)");
DEFINE_int32(maxclients, 10000,
             "Maximum simultaneous client connections; "
             "more are refused with '-ERR max number of clients reached'. "
             "Lowered at start (with a warning) to what the open files limit "
             "allows: ulimit -n minus the files open then minus 32");
DEFINE_int64(
    max_request_bytes, 64 << 20,
    "Largest request (one command with all its arguments), in bytes; "
    "a larger one gets a protocol error and its connection is closed. "
    "Before AUTH (when clients must log in: --requirepass, or an --aclfile "
    "whose default user is off or has a password): at most 10 arguments "
    "of 16 KiB");
DEFINE_int64(max_reply_bytes, 64 << 20,
             "Largest reply to MGET, KEYS, SCAN or CLIENT LIST, in bytes: a "
             "command whose reply would be larger gets '-ERR reply of more "
             "than N bytes (max_reply_bytes)' instead");
DEFINE_int32(max_multi_commands, 10000,
             "Most commands one MULTI may queue; one more gets an error and "
             "the transaction is discarded (EXEC answers -EXECABORT)");
DEFINE_int64(
    max_multi_bytes, 64 << 20,
    "Most bytes one MULTI's queue may hold: its arguments' bytes plus 32 "
    "per argument (its string) and a record per command (as "
    "--max_multi_commands)");
DEFINE_int64(maxmemory_clients, -1,
             "Most bytes all clients together may hold in grown request "
             "buffers, MULTI queues and replies not yet taken (64 KiB or "
             "more each; as Redis 7's maxmemory-clients). "
             "Past it the clients holding the most are closed until the "
             "others fit: other clients (evicted), or the one asking, once "
             "it would hold the most ('-ERR client memory limit reached', "
             "closed; in a MULTI the transaction is discarded). -1 = a "
             "quarter of the memory the "
             "process may have (the machine's, or its cgroup's limit); 0 = "
             "no cap");
DEFINE_int32(timeout, 0,
             "Close a connection that sent no complete command "
             "for this many seconds (Redis' timeout); 0 = never");
DEFINE_int32(tcp_keepalive, 300,
             "Send TCP keepalive probes on a client connection idle this "
             "many seconds (Redis' tcp-keepalive; 1 to 32767): a client "
             "whose host went away without closing is closed about this "
             "long plus 3 probes a third of it apart later, and its slot "
             "freed; 0 = off (it then holds its slot until --timeout, or "
             "for ever)");
DEFINE_int32(auth_timeout, 10,
             "When clients must log in (--requirepass, or an --aclfile "
             "whose default user is off or has a password): close a "
             "connection that has not authenticated this many seconds after "
             "connecting; 0 = never");
DEFINE_int32(io_threads, 0,
             "Event loops serving connections, each a thread "
             "(commands run on them; a database thread beside them takes "
             "--sync group commits and pipelined reads when it is free). "
             "0 = half the CPU cores, at least 1");
DEFINE_bool(allow_unfenced, false,
            "Accept writes without FENCE <token>. Each is logged and counted "
            "(INFO fencing: unfenced_writes). Off: they get -NOFENCE");
DEFINE_int32(metrics_port, 0,
             "If > 0, serve Prometheus metrics at "
             "http://<metrics_bind>:<port>/metrics (HTTP basic auth whenever "
             "the RESP port asks for AUTH: user 'default' and the password, "
             "or an --aclfile user allowed INFO)");
DEFINE_string(metrics_bind, "127.0.0.1",
              "Address the metrics port listens "
              "on (apart from --bind: metrics stay local unless exposed); a "
              "name is resolved once at start, to its first IPv4 address if "
              "it has one. IPv6 only if the system's civetweb was built with "
              "it (Debian 12's was not: refused at start)");
DEFINE_int32(shutdown_timeout_ms, 5000,
             "On SIGTERM/SIGINT, how long running "
             "commands may take to finish before connections are closed");
DEFINE_int64(fence_cache_bytes, fencedkv::Options().fence_cache_bytes,
             "Memory budget of the in-memory view of domain max tokens");
DEFINE_bool(fence_cache_prefault, true,
            "Make the fence view's --fence_cache_bytes resident at start "
            "(the open zeroes them), so the first writes, each touching a "
            "random part of it, do not each take a page fault. false: the "
            "memory is faulted in as writes touch it");
// By memtable. A skiplist insert walks a list whose depth and cache misses
// grow with its size (redis-benchmark SET -P 16: 150k/s at 64 MiB, 240k/s
// at 8 MiB on the 2-core test machine), so skiplist keeps 8 MiB. A hash
// memtable insert is one probe whatever its size, and there a small memtable
// only means more flushes and far more compaction: at 8 MiB the compaction
// thread spent more CPU than the flushes (2M SET -P 16 over 1M keys: 4.4 us
// of server CPU per SET at 64 MiB against 6.6 at 8 MiB, medians of three).
constexpr int64_t kHashMemtableBytes = int64_t{64} << 20;
constexpr int64_t kSkiplistMemtableBytes = int64_t{8} << 20;
DEFINE_int64(write_buffer_size, 0,
             "RocksDB memtable bytes before a flush; 0 (default): 64 MiB with "
             "--memtable=hash, 8 MiB with --memtable=skiplist (a skiplist "
             "insert gets dearer as the memtable grows; a hash insert does "
             "not, and a larger memtable means fewer flushes and less "
             "compaction, at the price of a longer sort for a new scan)");
// A Redis-protocol server is a point-operation store: with the hash
// memtable a SET is a hash probe instead of a skiplist search (redis-benchmark
// SET -P 1 went from ~108k to ~125k/s on the 2-core test machine). Scans pay
// instead: each new iterator sorts a copy of the memtable's entry list first
// (45 ms at a full 64 MiB memtable), so SCAN keeps its iterator with its
// cursor.
DEFINE_string(memtable, "hash",
              "RocksDB memtable: hash (point writes and reads are a hash "
              "probe; a new scan first sorts the memtable) or skiplist "
              "(ordered inserts; cheap scans)");
// Larger than the library's 32 MiB: a server is expected to answer its
// working set from memory (kvrocks defaults to 4 GiB). The cache grows as
// blocks are read; it is not allocated up front.
DEFINE_int64(block_cache_size, 256 << 20,
             "RocksDB block cache bytes (uncompressed data blocks kept in "
             "memory; 0 = none)");
// A GET answered from RocksDB costs about three times what the rest of the
// server spends on it (memtable, filter, index and block lookups); a hot
// key's latest value in memory answers it without them. Like the block
// cache, it grows as keys are read and written.
// glibc reads its tunables when a program starts, so the server sets these
// in its environment and executes itself again, once, before anything else
// (same PID, same arguments). main.cc says why one heap: glibc gives a
// thread's own heap huge pages only where it starts.
DEFINE_bool(malloc_hugepages, true,
            "Ask for transparent huge pages for the heap: glibc's "
            "glibc.malloc.hugetlb=1 and glibc.malloc.arena_max=1 tunables "
            "(one heap for all threads: glibc gives a thread's own heap huge "
            "pages only for its first part), set by re-executing once at "
            "start; a tunable GLIBC_TUNABLES already names is left as it is. "
            "Random reads over large caches then miss the TLB far less (GET "
            "-P 16 about 1.3x faster in tools/server_bench.sh), and a "
            "growing cache or memtable takes a page fault per 2 MiB, not per "
            "4 KiB; the kernel may hold memory in 2 MiB pages. false: the "
            "kernel's default pages");
// glibc grows a heap by what a request lacks plus 128 KiB, gives the free
// memory at its top back to the kernel past 128 KiB, and maps blocks of
// 128 KiB or more on their own (thresholds that rise only as large blocks
// are freed). A server allocates and frees by the megabyte (replies,
// batches, memtable blocks), so its heaps shrank and grew back all the
// time, and every page that came back was a fresh page fault on first
// touch (a fault costs microseconds in a virtual machine).
DEFINE_int64(malloc_retain_mb, 256,
             "Free heap memory kept for reuse rather than given back to the "
             "kernel, in MiB per heap; the heap then also grows 16 MiB at a "
             "time (room for huge pages) and takes blocks up to 32 MiB "
             "rather than mapping each one. Fewer page faults (SET -P 16: "
             "73 to 37 per 1,000 requests, about 10% less CPU); the "
             "resident size falls back only once this much is free at the "
             "heap's top (then to 16 MiB of it). 0: glibc's defaults; at "
             "most 2047");
// A page's first touch costs far more in a virtual machine than a write
// does (the host backs it then; a VM that hands freed memory back to its
// host pays it again for every new process): under perf, 15% of a fresh
// server's CPU in SET -P 16 --sync went to zeroing fresh pages as the
// value cache and memtable grew. Touched at start, they are on no
// request's path.
DEFINE_int64(malloc_prefault_mb, -1,
             "Heap memory touched at start, in MiB, then kept free for "
             "reuse: the value cache and memtables grow into pages that are "
             "already there instead of taking a page fault on a write's "
             "path. Resident from the start. It warms glibc's main heap, "
             "which every thread uses only with one heap "
             "(--malloc_hugepages, or glibc.malloc.arena_max=1). Must be "
             "at least 32 below --malloc_retain_mb; -1: with one heap, "
             "three quarters of --malloc_retain_mb (192 by default), at "
             "most 32 below it "
             "and an eighth of the memory the process may have (the "
             "machine's or its cgroup's limit), else 0; 0: none");
DEFINE_int64(value_cache_size, 256 << 20,
             "Value cache bytes: the latest values of recently read or "
             "written keys, so a GET of a hot key skips RocksDB's lookups "
             "(exact: never older than the store; keys, values and metadata "
             "counted; an entry over 64 KiB is not kept; 0 = off)");

DEFINE_int64(slowlog_log_slower_than, 10000,
             "SLOWLOG: log commands that take at least this many "
             "microseconds (-1: none, 0: every command)");
DEFINE_int32(slowlog_max_len, 128,
             "SLOWLOG: keep the last N slow commands (each at most about "
             "5.5 KiB: 32 arguments of 128 bytes), 0..100000");
DEFINE_bool(rocksdb_statistics, true,
            "Collect RocksDB's statistics tickers (block cache hits and "
            "misses, stall time) for /metrics; tickers only, no histograms "
            "or timers");
// Replication (docs/replication.md, README "Replicas and failover").
DEFINE_string(replicaof, "",
              "host:port of the primary to replicate (manual mode, as Redis' "
              "replicaof; no automatic failover). Empty: the primary this "
              "server followed when it stopped, if any (kept in the database "
              "directory's REPLICATION file), else start as a primary. "
              "'none' (or 'no one'): start as a primary whatever was kept. "
              "REPLICAOF host port / REPLICAOF NO ONE change it at run time, "
              "and are kept for a restart");
DEFINE_string(masteruser, "",
              "ACL user a replica logs in to its primary as (FENCEDKV.SYNC "
              "is @admin); with --masterauth");
DEFINE_string(masterauth, "",
              "Password a replica logs in to its primary with (AUTH); empty: "
              "no AUTH");
DEFINE_int32(min_insync_replicas, 1,
             "A write is acknowledged only while the in-sync replica set, "
             "this server included, has at least this many members "
             "(1 = the primary alone)");
DEFINE_string(shard, "",
              "etcd mode: the shard this server belongs to. etcd's record "
              "<etcd_prefix>/shards/<shard> names the primary and its in-sync "
              "replicas; a replica of that set takes over when the primary's "
              "etcd lease expires (needs --etcd_endpoints; not with "
              "--replicaof)");
DEFINE_string(etcd_prefix, "/fencedkv", "etcd mode: the prefix of the keys");
DEFINE_string(announce_addr, "",
              "host:port other machines reach this server at: written to etcd "
              "(the shard's primary and in-sync set, SENTINEL's answers) and "
              "sent to a primary as this replica's name. Empty: --bind and the "
              "port. Required in etcd mode when --bind is 0.0.0.0 or ::; in "
              "manual mode a primary names such a replica by the address it "
              "connects from");
DEFINE_int32(etcd_lease_ttl_ms, 2000,
             "etcd mode: the TTL of this server's etcd lease (etcd rounds it "
             "up to whole seconds, 2 s at least): a primary that could not "
             "renew it for this long stops acknowledging writes, and one "
             "whose lease expired is replaced");
DEFINE_int32(replica_lag_ms, 10000,
             "A replica of the in-sync set that has not acknowledged, for "
             "this long, what the primary had then leaves the set (writes "
             "stop waiting for it); it joins again once caught up");
DEFINE_int32(repl_timeout_ms, 10000,
             "A replication link silent for this long is dropped (the "
             "replica reconnects); so is a replica that takes nothing sent "
             "to it for this long");
DEFINE_int32(max_replicas, 16, "Replicas a primary serves at once at most");
DEFINE_int64(wal_retention_mb, 1024,
             "MiB of write-ahead log kept after it is flushed, so that a "
             "replica that was away can catch up from the log instead of a "
             "full copy (0 with --wal_retention_seconds=0: none kept)");
DEFINE_int64(repl_backlog_mb, 32,
             "MiB of the newest committed batches a primary keeps in memory "
             "for its replica links, which send them from there; a replica "
             "further behind is sent the rest from the write-ahead log "
             "(0: always from the log)");
DEFINE_bool(drop_wal_after_damage, false,
            "Open the database even though its write-ahead log holds intact "
            "writes after damage (a flipped byte mid-log, not a torn tail), "
            "or it recovered below what its SYNCED stamp says was synced (a "
            "log file deleted), dropping those writes and any fence raises "
            "among them; without it such a start fails naming them "
            "(docs/faults.md)");
DEFINE_int32(wal_sync_interval_ms, 1000,
             "Without --sync: once per interval with writes, the next write "
             "(a replica: the next batch it applies) is fsync'ed, and when "
             "none comes for a whole interval the log is fsync'ed without "
             "one, so that a power cut loses at most about this much of the "
             "writes (twice it when they had just stopped); 0: never "
             "(docs/faults.md). Unused with --sync (every write is synced)");
DEFINE_int64(wal_retention_seconds, 0,
             "Seconds the write-ahead log is kept after it is flushed "
             "(0: by size only, --wal_retention_mb)");

namespace {

using fencedkv::FlagInRange;
bool ValidatePort(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 65535);
}
bool ValidateMetricsPort(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 65535);
}
bool ValidateThreads(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 256);
}
bool ValidateClients(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 1, 1000000);
}
bool ValidateSlowlogThreshold(const char* flag, int64_t v) {
  return FlagInRange(flag, v, -1, INT64_MAX);
}
bool ValidateSlowlogLen(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 100000);
}
bool ValidateGather(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 10000);
}
bool ValidateRequestBytes(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 1024, int64_t{1} << 30);
}
bool ValidateSkew(const char* flag, int64_t v) {
  return FlagInRange(flag, v, -1, INT64_MAX);
}
bool ValidateLeases(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 1, int64_t{1} << 32);
}
bool ValidateTokenSource(const char* flag, const std::string& v) {
  if (v == "builtin" || v == "etcd") return true;
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" (expected builtin or etcd)\n",
               flag, v.c_str());
  return false;
}
bool ValidateRefresh(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 10, 60000);
}
bool ValidateTimeout(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 3600 * 1000);
}
bool ValidateReplyBytes(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 1024, int64_t{4} << 30);
}
bool ValidateMultiCommands(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 1, 10000000);
}
bool ValidateMultiBytes(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 1024, int64_t{4} << 30);
}
bool ValidateClientMemory(const char* flag, int64_t v) {
  return FlagInRange(flag, v, -1, int64_t{1} << 50);
}
bool ValidateSeconds(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 365 * 24 * 3600);
}
bool ValidateKeepalive(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 32767);  // Linux's TCP_KEEPIDLE bound
}
bool ValidateCache(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 0, int64_t{1} << 40);
}
bool ValidateWriteBuffer(const char* flag, int64_t v) {
  return v == 0 || FlagInRange(flag, v, 64 << 10, int64_t{1} << 34);
}
bool ValidateDomain(const char* flag, const std::string& v) {
  if (v.empty()) return true;
  fencedkv::FenceDomainSpec spec;
  fencedkv::Status s = fencedkv::FenceDomainSpec::Parse(v, &spec);
  if (s.ok()) return true;
  std::fprintf(stderr, "Invalid value for --%s: %s\n", flag,
               s.ToString().c_str());
  return false;
}
// A shard name is part of etcd keys and a line of REPLICATION: printable
// ASCII without spaces or '/', at most 128 bytes, not "-".
bool ValidateShard(const char* flag, const std::string& v) {
  bool ok = v != "-" && v.size() <= 128;
  for (const char c : v) ok = ok && c > ' ' && c < 127 && c != '/';
  if (ok) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" (a shard name is printable "
               "ASCII without spaces or '/', at most 128 bytes, not \"-\")\n",
               flag, fencedkv::EscapeBytes(v).c_str());
  return false;
}
bool ValidateMemtable(const char* flag, const std::string& v) {
  if (v == "hash" || v == "skiplist") return true;
  std::fprintf(stderr,
               "Invalid value for --%s: \"%s\" (expected hash or skiplist)\n",
               flag, v.c_str());
  return false;
}
bool ValidateMode(const char* flag, const std::string& v) {
  fencedkv::FenceMode mode;
  if (v.empty() || fencedkv::ParseFenceMode(v, &mode)) return true;
  std::fprintf(
      stderr, "Invalid value for --%s: \"%s\" (expected monotonic or strict)\n",
      flag, v.c_str());
  return false;
}

bool ValidateInsync(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 1, 64);
}
bool ValidateReplTimeout(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 100, 3600 * 1000);
}
bool ValidateWalSyncInterval(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 0, 3600 * 1000);
}
bool ValidateMaxReplicas(const char* flag, int32_t v) {
  return FlagInRange(flag, v, 1, 1024);
}
bool ValidateRetention(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 0, int64_t{1} << 40);
}

bool ValidateRetainMb(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 0, 2047);  // glibc takes an int of bytes
}

bool ValidatePrefaultMb(const char* flag, int64_t v) {
  return FlagInRange(flag, v, -1, 2047);
}

bool ValidateBacklog(const char* flag, int64_t v) {
  return FlagInRange(flag, v, 0, int64_t{1} << 20);  // 1 TiB
}

const bool kRegistered = [] {
  gflags::RegisterFlagValidator(&FLAGS_min_insync_replicas, &ValidateInsync);
  gflags::RegisterFlagValidator(&FLAGS_repl_timeout_ms, &ValidateReplTimeout);
  gflags::RegisterFlagValidator(&FLAGS_replica_lag_ms, &ValidateReplTimeout);
  gflags::RegisterFlagValidator(&FLAGS_etcd_lease_ttl_ms, &ValidateReplTimeout);
  gflags::RegisterFlagValidator(&FLAGS_max_replicas, &ValidateMaxReplicas);
  gflags::RegisterFlagValidator(&FLAGS_wal_sync_interval_ms,
                                &ValidateWalSyncInterval);
  gflags::RegisterFlagValidator(&FLAGS_wal_retention_mb, &ValidateRetention);
  gflags::RegisterFlagValidator(&FLAGS_repl_backlog_mb, &ValidateBacklog);
  gflags::RegisterFlagValidator(&FLAGS_malloc_retain_mb, &ValidateRetainMb);
  gflags::RegisterFlagValidator(&FLAGS_malloc_prefault_mb, &ValidatePrefaultMb);
  gflags::RegisterFlagValidator(&FLAGS_wal_retention_seconds,
                                &ValidateRetention);
  gflags::RegisterFlagValidator(&FLAGS_port, &ValidatePort);
  gflags::RegisterFlagValidator(&FLAGS_metrics_port, &ValidateMetricsPort);
  gflags::RegisterFlagValidator(&FLAGS_io_threads, &ValidateThreads);
  gflags::RegisterFlagValidator(&FLAGS_maxclients, &ValidateClients);
  gflags::RegisterFlagValidator(&FLAGS_max_request_bytes,
                                &ValidateRequestBytes);
  gflags::RegisterFlagValidator(&FLAGS_max_reply_bytes, &ValidateReplyBytes);
  gflags::RegisterFlagValidator(&FLAGS_max_multi_commands,
                                &ValidateMultiCommands);
  gflags::RegisterFlagValidator(&FLAGS_max_multi_bytes, &ValidateMultiBytes);
  gflags::RegisterFlagValidator(&FLAGS_maxmemory_clients,
                                &ValidateClientMemory);
  gflags::RegisterFlagValidator(&FLAGS_timeout, &ValidateSeconds);
  gflags::RegisterFlagValidator(&FLAGS_auth_timeout, &ValidateSeconds);
  gflags::RegisterFlagValidator(&FLAGS_tcp_keepalive, &ValidateKeepalive);
  gflags::RegisterFlagValidator(&FLAGS_shutdown_timeout_ms, &ValidateTimeout);
  gflags::RegisterFlagValidator(&FLAGS_max_token_skew, &ValidateSkew);
  gflags::RegisterFlagValidator(&FLAGS_max_leases, &ValidateLeases);
  gflags::RegisterFlagValidator(&FLAGS_token_source, &ValidateTokenSource);
  gflags::RegisterFlagValidator(&FLAGS_etcd_refresh_ms, &ValidateRefresh);
  gflags::RegisterFlagValidator(&FLAGS_fence_cache_bytes, &ValidateCache);
  gflags::RegisterFlagValidator(&FLAGS_slowlog_log_slower_than,
                                &ValidateSlowlogThreshold);
  gflags::RegisterFlagValidator(&FLAGS_slowlog_max_len, &ValidateSlowlogLen);
  gflags::RegisterFlagValidator(&FLAGS_sync_gather_us, &ValidateGather);
  gflags::RegisterFlagValidator(&FLAGS_write_buffer_size, &ValidateWriteBuffer);
  gflags::RegisterFlagValidator(&FLAGS_block_cache_size, &ValidateCache);
  gflags::RegisterFlagValidator(&FLAGS_value_cache_size, &ValidateCache);
  gflags::RegisterFlagValidator(&FLAGS_memtable, &ValidateMemtable);
  gflags::RegisterFlagValidator(&FLAGS_fence_domain, &ValidateDomain);
  gflags::RegisterFlagValidator(&FLAGS_shard, &ValidateShard);
  gflags::RegisterFlagValidator(&FLAGS_fence_mode, &ValidateMode);
  return true;
}();

}  // namespace

namespace fencedkv {
namespace server {

Status ResolveRequirepass(std::string* password) {
  const char* env = std::getenv("FENCEDKV_REQUIREPASS");
  const int sources = (FLAGS_requirepass.empty() ? 0 : 1) +
                      (FLAGS_requirepass_file.empty() ? 0 : 1) +
                      (env != nullptr && *env != '\0' ? 1 : 0);
  if (sources > 1) {
    return Status::InvalidArgument(
        "the password is given more than once",
        "set one of --requirepass, --requirepass_file, FENCEDKV_REQUIREPASS");
  }
  if (!FLAGS_requirepass_file.empty()) {
    std::string pass;
    Status s =
        ReadConfigFile(FLAGS_requirepass_file, "--requirepass_file", &pass);
    if (!s.ok()) return s;
    if (!pass.empty() && pass.back() == '\n') pass.pop_back();
    if (!pass.empty() && pass.back() == '\r') pass.pop_back();
    if (pass.empty() || pass.find('\n') != std::string::npos) {
      return Status::InvalidArgument("--requirepass_file " +
                                     FLAGS_requirepass_file +
                                     " must hold exactly one non-empty line");
    }
    *password = std::move(pass);
  } else if (env != nullptr && *env != '\0') {
    *password = env;
  } else {
    *password = FLAGS_requirepass;
  }
  return Status::OK();
}

size_t WriteBufferSize() {
  if (FLAGS_write_buffer_size != 0) {
    return static_cast<size_t>(FLAGS_write_buffer_size);
  }
  return static_cast<size_t>(FLAGS_memtable == "skiplist"
                                 ? kSkiplistMemtableBytes
                                 : kHashMemtableBytes);
}

}  // namespace server
}  // namespace fencedkv
