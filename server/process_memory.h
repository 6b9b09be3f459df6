// Copyright (c) fencedkv authors.
//
// The process's memory as INFO memory and /metrics report it. Thread-safe.

#ifndef FENCEDKV_SERVER_PROCESS_MEMORY_H_
#define FENCEDKV_SERVER_PROCESS_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fencedkv {
namespace server {

struct ServerState;

// Bytes the allocator has handed out and not taken back (glibc's
// mallinfo2: in-use chunks plus mmap'ed blocks): Redis' used_memory; the
// resident set if glibc's malloc is not the one in use (mallinfo2 then
// says 0, e.g. under a sanitizer). Walks the malloc arenas (microseconds):
// not for a hot path.
uint64_t UsedMemory();
// The resident set size (/proc/self/statm), 0 if unreadable.
uint64_t RssBytes();
// Raises state->peak_memory to UsedMemory() if above; returns UsedMemory().
uint64_t NotePeakMemory(ServerState* state);
// Redis' "human" form: 1.23M, 512B, 2.00G.
std::string HumanBytes(uint64_t bytes);

// The files that may hold a memory limit of a process whose
// /proc/self/cgroup reads `cgroup` and /proc/self/mountinfo `mountinfo`:
// for its cgroup (v2 "0::/path"; v1 "N:...memory...:/path") that cgroup's
// and every ancestor's that a cgroup mount shows (v2 memory.max, v1
// memory.limit_in_bytes), since the lowest limit on the way up applies.
// The cgroup's path is resolved through the mount's root (mountinfo's 4th
// field): a container that shares the host's cgroup namespace sees
// "/docker/<id>/sub" in /proc/self/cgroup but has "/docker/<id>" mounted
// at /sys/fs/cgroup/memory, so its limit is in
// /sys/fs/cgroup/memory/sub/..., not .../docker/<id>/sub/.... A mount of
// another cgroup (a sibling, a child) is not read: its limit is not this
// process's. For a version (v1, v2) of which mountinfo shows no mount
// (unreadable, or another kind of file system there), its usual mount
// point is assumed, mounting the root (v2 /sys/fs/cgroup, v1
// /sys/fs/cgroup/memory).
std::vector<std::string> CgroupLimitFiles(const std::string& cgroup,
                                          const std::string& mountinfo);
// The memory this process may use: the machine's, or the lowest memory
// limit of its cgroup and the cgroups above it (CgroupLimitFiles) if lower.
// 4 GiB if unknown.
size_t AvailableMemory();

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_PROCESS_MEMORY_H_
