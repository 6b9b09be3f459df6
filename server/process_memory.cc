// Copyright (c) fencedkv authors.

#include "process_memory.h"

#include <cstdio>

#include <malloc.h>
#include <unistd.h>

#include "server_state.h"

namespace fencedkv {
namespace server {

uint64_t UsedMemory() {
  const struct mallinfo2 mi = mallinfo2();
  const uint64_t used =
      static_cast<uint64_t>(mi.uordblks) + static_cast<uint64_t>(mi.hblkhd);
  // glibc's malloc has handed out nothing: another allocator serves the
  // process (a sanitizer's, a preloaded jemalloc), which mallinfo2 cannot
  // see. The resident set is the nearest honest figure.
  return used > 0 ? used : RssBytes();
}

uint64_t RssBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<uint64_t>(resident) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t NotePeakMemory(ServerState* state) {
  const uint64_t used = UsedMemory();
  uint64_t peak = state->peak_memory.load(std::memory_order_relaxed);
  while (used > peak && !state->peak_memory.compare_exchange_weak(
                            peak, used, std::memory_order_relaxed)) {
  }
  return used;
}

std::string HumanBytes(uint64_t bytes) {
  // As Redis' bytesToHuman.
  char buf[64];
  const double d = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%lluB",
                  static_cast<unsigned long long>(bytes));
  } else if (bytes < 1024ull * 1024) {
    std::snprintf(buf, sizeof(buf), "%.2fK", d / 1024);
  } else if (bytes < 1024ull * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.2fM", d / (1024 * 1024));
  } else if (bytes < 1024ull * 1024 * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.2fG", d / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2fT", d / (1024.0 * 1024 * 1024 * 1024));
  }
  return buf;
}

}  // namespace server
}  // namespace fencedkv
