// Copyright (c) fencedkv authors.
//
// libFuzzer target for the RESP parser: any bytes must parse, ask for more,
// or fail cleanly -- never crash, never read outside the buffer, and every
// argument of a parsed command must lie inside the bytes consumed.
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//     server/resp_parser_fuzzer.cc server/resp_parser.cc -o resp_fuzz
//   ./resp_fuzz -max_total_time=60

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "resp_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fencedkv::server::RespParser::Limits limits;
  limits.max_request_bytes = 1 << 16;
  limits.max_args = 1024;
  limits.max_inline_bytes = 4096;
  fencedkv::server::RespParser parser(limits);
  std::vector<std::string_view> args;
  const char* buf = reinterpret_cast<const char*>(data);
  size_t pos = 0;
  while (pos < size) {
    size_t consumed = 0;
    const auto r = parser.Parse(buf + pos, size - pos, &args, &consumed);
    if (r != fencedkv::server::RespParser::Result::kCommand) break;
    if (consumed == 0 || consumed > size - pos) std::abort();
    for (std::string_view a : args) {
      if (a.data() < buf + pos || a.data() + a.size() > buf + pos + consumed) {
        std::abort();
      }
    }
    pos += consumed;
  }
  return 0;
}
