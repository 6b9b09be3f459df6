// Copyright (c) fencedkv authors.

#include "process_memory.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

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

namespace {

// A mountinfo field with its octal escapes (\040 space, \011 tab, \012
// newline, \134 backslash) undone.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' &&
        field[i + 1] <= '3' && field[i + 2] >= '0' && field[i + 2] <= '7' &&
        field[i + 3] >= '0' && field[i + 3] <= '7') {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 +
                                      (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

struct CgroupMount {
  bool v2;
  std::string root;   // the cgroup mounted there
  std::string point;  // where
};

// The cgroup2 mounts and the v1 mounts of the memory controller.
std::vector<CgroupMount> CgroupMounts(const std::string& mountinfo) {
  std::vector<CgroupMount> mounts;
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::vector<std::string> f{std::istream_iterator<std::string>(in),
                               std::istream_iterator<std::string>()};
    // id parent major:minor root point options [optional...] - type source
    // super-options
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 3 >= f.size()) continue;  // (also: fewer than 10 fields)
    const std::string& type = f[dash + 1];
    const std::string super = "," + f[dash + 3] + ",";
    CgroupMount m;
    if (type == "cgroup2") {
      m.v2 = true;
    } else if (type == "cgroup" &&
               super.find(",memory,") != std::string::npos) {
      m.v2 = false;
    } else {
      continue;
    }
    m.root = Unescape(f[3]);
    m.point = Unescape(f[4]);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

}  // namespace

std::vector<std::string> CgroupLimitFiles(const std::string& cgroup,
                                          const std::string& mountinfo) {
  std::vector<CgroupMount> mounts = CgroupMounts(mountinfo);
  // A version no mount in mountinfo shows (none readable, or another kind
  // of file system there): its usual mount point, as mounting the root.
  bool mounted[2] = {false, false};  // [v2]
  for (const CgroupMount& m : mounts) mounted[m.v2 ? 1 : 0] = true;
  if (!mounted[1]) mounts.push_back({true, "/", "/sys/fs/cgroup"});
  if (!mounted[0]) mounts.push_back({false, "/", "/sys/fs/cgroup/memory"});
  // The process's cgroup in each version ("0::/path"; "N:...memory...:/path").
  // One /proc/self/cgroup does not name (unreadable): the root of what the
  // mounts show.
  std::vector<std::string> paths[2];
  bool named[2] = {false, false};
  std::istringstream lines(cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    int v;
    if (line.compare(0, a, "0") == 0 && controllers == ",,") {
      v = 1;
    } else if (controllers.find(",memory,") != std::string::npos) {
      v = 0;
    } else {
      continue;
    }
    named[v] = true;
    const std::string path = line.substr(b + 1);
    // (Outside the namespace's root, "/../x": no mount shows it.)
    if (!path.empty() && path[0] == '/' &&
        (path + "/").find("/../") == std::string::npos) {
      paths[v].push_back(path);
    }
  }
  for (int v = 0; v < 2; ++v) {
    if (!named[v]) paths[v].push_back("/");
  }
  std::vector<std::string> files;
  auto add = [&files](std::string file) {
    for (const std::string& f : files) {
      if (f == file) return;
    }
    files.push_back(std::move(file));
  };
  for (int v = 0; v < 2; ++v) {
    const char* file = v == 1 ? "/memory.max" : "/memory.limit_in_bytes";
    for (const std::string& path : paths[v]) {
      for (const CgroupMount& m : mounts) {
        if (m.v2 != (v == 1)) continue;
        std::string rel;
        if (m.root == "/") {
          rel = path == "/" ? "" : path;
        } else if (path == m.root) {
          rel = "";
        } else if (path.compare(0, m.root.size(), m.root) == 0 &&
                   path[m.root.size()] == '/') {
          rel = path.substr(m.root.size());
        } else {
          continue;  // a mount of another cgroup: not this process's limit
        }
        for (;;) {
          add(m.point + rel + file);
          if (rel.empty()) break;
          rel.erase(rel.rfind('/'));
        }
      }
    }
  }
  return files;
}

size_t AvailableMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  size_t bytes = pages > 0 && page > 0
                     ? static_cast<size_t>(pages) * static_cast<size_t>(page)
                     : size_t{4} << 30;
  auto slurp = [](const char* name) {
    std::ifstream in(name);
    return std::string(std::istreambuf_iterator<char>(in),
                       std::istreambuf_iterator<char>());
  };
  for (const std::string& f : CgroupLimitFiles(slurp("/proc/self/cgroup"),
                                               slurp("/proc/self/mountinfo"))) {
    std::ifstream in(f);
    unsigned long long limit = 0;
    if (in >> limit && limit > 0 && limit < bytes) {  // ("max": no limit)
      bytes = static_cast<size_t>(limit);
    }
  }
  return bytes;
}

}  // namespace server
}  // namespace fencedkv
