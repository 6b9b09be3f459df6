// Copyright (c) fencedkv authors.
//
// The process's memory as INFO memory and /metrics report it. Thread-safe.

#ifndef FENCEDKV_SERVER_PROCESS_MEMORY_H_
#define FENCEDKV_SERVER_PROCESS_MEMORY_H_

#include <cstdint>
#include <string>

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

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_PROCESS_MEMORY_H_
