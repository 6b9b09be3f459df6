// Copyright (c) fencedkv authors.
//
// --help for fencedkv's programs: gflags' own --help lists every linked
// library's flags (glog's, gflags'), burying the program's. Call before
// gflags::ParseCommandLineFlags: it rewrites --help / -help / -h into
// --helpmatch=<module>, so only flags defined in files whose path contains
// `module` are shown. --helpfull still lists everything.

#ifndef FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_
#define FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_

#include <cstring>
#include <string>

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

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_HELP_FLAGS_H_
