// Copyright (c) fencedkv authors.
//
// --help for fencedkv's programs: gflags' own --help lists every linked
// library's flags (glog's, gflags'), burying the program's. Call before
// gflags::ParseCommandLineFlags: it rewrites --help / -help / -h into
// --helpmatch=<module>, so only flags defined in files whose path contains
// `module` are shown. --helpfull still lists everything. (gflags exits 1
// after --help; see ShowHelpIfAsked for a --help that exits 0.)

#ifndef FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_
#define FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_

#include <cstring>
#include <string>

#include <gflags/gflags.h>

namespace fencedkv {

inline void NarrowHelpToModule(int argc, char** argv, const char* module) {
  static std::string arg;  // outlives flag parsing
  arg = std::string("--helpmatch=") + module;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      argv[i] = arg.data();
    }
  }
}

// For programs whose --help should exit 0 (gflags' own exits 1): if argv
// asks for --help / -help / -h, prints the usage message and the flags
// defined in files whose path contains `module`, and returns true (the
// caller exits 0). Call before gflags::ParseCommandLineFlags. --helpfull
// is gflags' own.
inline bool ShowHelpIfAsked(int argc, char** argv, const char* module) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;  // a command's own
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], module);
      return true;
    }
  }
  return false;
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_
