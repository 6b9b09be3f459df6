// Copyright (c) fencedkv authors.
//
// --help for fencedkv's programs. gflags' own --help lists every linked
// library's flags (glog's, gflags'), burying the program's, prints the
// program name twice and the build machine's source paths. Call
// NarrowHelpToModule after gflags::SetUsageMessage and before
// gflags::ParseCommandLineFlags: on --help / -help / -h it prints the usage
// message and the flags defined in files whose path contains `module`, each
// with its help, type and default, and exits 0. --helpfull still lists
// everything (gflags' own format).
//
// FlagInRange: the programs' flag validators' one check of a numeric range.

#ifndef FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_
#define FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gflags/gflags.h>

namespace fencedkv {

inline void NarrowHelpToModule(int argc, char** argv, const char* module) {
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) break;  // a command's own arguments
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      help = true;
    }
  }
  if (!help) return;
  // Word-wraps `text` at 78 columns, each line indented by 6.
  auto wrapped = [](const std::string& text) {
    std::string out, line;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find(' ', pos);
      if (end == std::string::npos) end = text.size();
      const std::string word = text.substr(pos, end - pos);
      if (!line.empty() && line.size() + 1 + word.size() > 72) {
        out += "      " + line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
      pos = end + 1;
    }
    if (!line.empty()) out += "      " + line + "\n";
    return out;
  };
  std::printf("%s\n\nFlags:\n", gflags::ProgramUsage());
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);  // sorted by name
  for (const auto& f : flags) {
    if (f.filename.find(module) == std::string::npos) continue;
    std::string dflt = f.default_value;
    if (f.type == "string") dflt.insert(0, 1, '"').push_back('"');
    std::printf("  --%s (%s, default %s)\n%s", f.name.c_str(), f.type.c_str(),
                dflt.c_str(), wrapped(f.description).c_str());
  }
  std::fflush(stdout);
  std::exit(0);
}

// For a gflags validator: true if lo <= v <= hi, else prints "Invalid value
// for --flag: v (must be lo..hi)" on stderr and returns false.
inline bool FlagInRange(const char* flag, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return true;
  std::fprintf(stderr,
               "Invalid value for --%s: %" PRId64 " (must be %" PRId64
               "..%" PRId64 ")\n",
               flag, v, lo, hi);
  return false;
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_
