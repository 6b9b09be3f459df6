// Copyright (c) fencedkv authors.
//
// fencedkv-server's flags (defined in server_flags.cc, with validators).

#ifndef FENCEDKV_SERVER_SERVER_FLAGS_H_
#define FENCEDKV_SERVER_SERVER_FLAGS_H_

#include <string>

#include <gflags/gflags.h>

#include "fencedkv/status.h"

DECLARE_string(bind);
DECLARE_int32(port);
DECLARE_string(port_file);
DECLARE_string(db);
DECLARE_string(fence_domain);
DECLARE_string(fence_mode);
DECLARE_bool(sync);
DECLARE_int32(sync_gather_us);
DECLARE_string(requirepass);
DECLARE_string(requirepass_file);
DECLARE_string(aclfile);
DECLARE_int32(maxclients);
DECLARE_int64(max_token_skew);
DECLARE_string(token_source);
DECLARE_string(etcd_endpoints);
DECLARE_int32(etcd_refresh_ms);
DECLARE_int64(max_leases);
DECLARE_int64(max_request_bytes);
DECLARE_int64(max_reply_bytes);
DECLARE_int32(max_multi_commands);
DECLARE_int64(max_multi_bytes);
DECLARE_int64(maxmemory_clients);
DECLARE_int32(timeout);
DECLARE_int32(tcp_keepalive);
DECLARE_int32(auth_timeout);
DECLARE_int32(io_threads);
DECLARE_bool(allow_unfenced);
DECLARE_int32(metrics_port);
DECLARE_string(metrics_bind);
DECLARE_int32(shutdown_timeout_ms);
DECLARE_int64(fence_cache_bytes);
DECLARE_bool(fence_cache_prefault);
DECLARE_int64(write_buffer_size);
DECLARE_int64(block_cache_size);
DECLARE_int64(value_cache_size);
DECLARE_bool(malloc_hugepages);
DECLARE_int64(malloc_retain_mb);
DECLARE_int64(malloc_prefault_mb);
DECLARE_string(memtable);
DECLARE_int64(slowlog_log_slower_than);
DECLARE_int32(slowlog_max_len);
DECLARE_bool(rocksdb_statistics);
DECLARE_string(replicaof);
DECLARE_string(masteruser);
DECLARE_string(masterauth);
DECLARE_int32(min_insync_replicas);
DECLARE_int32(repl_timeout_ms);
DECLARE_int32(replica_lag_ms);
DECLARE_string(shard);
DECLARE_string(etcd_prefix);
DECLARE_string(announce_addr);
DECLARE_int32(etcd_lease_ttl_ms);
DECLARE_int32(max_replicas);
DECLARE_int64(wal_retention_mb);
DECLARE_int64(repl_backlog_mb);
DECLARE_int64(wal_retention_seconds);
DECLARE_bool(drop_wal_after_damage);
DECLARE_int32(wal_sync_interval_ms);

namespace fencedkv {
namespace server {

// The 'default' user's password: from --requirepass, --requirepass_file (one
// line; its newline is dropped) or the FENCEDKV_REQUIREPASS environment
// variable, at most one of them; empty if none. InvalidArgument if several
// are set or the file is empty, IOError if it cannot be read.
Status ResolveRequirepass(std::string* password);

// --write_buffer_size, its default (0) resolved by --memtable: 64 MiB for
// hash, 8 MiB for skiplist.
size_t WriteBufferSize();

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_SERVER_FLAGS_H_
