// Copyright (c) fencedkv authors.
//
// Fixed-width little-endian integer encoding (the on-disk format uses
// fixed64 for tokens so records can be decoded without a length prefix).

#ifndef FENCEDKV_ENGINE_UTIL_CODING_H_
#define FENCEDKV_ENGINE_UTIL_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace fencedkv {

inline void EncodeFixed64(char* dst, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    dst[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
}

inline uint64_t DecodeFixed64(const char* src) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(src[i]))
             << (8 * i);
  }
  return value;
}

inline void PutFixed64(std::string* dst, uint64_t value) {
  char buf[8];
  EncodeFixed64(buf, value);
  dst->append(buf, 8);
}

inline void EncodeFixed32(char* dst, uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    dst[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
}

inline uint32_t DecodeFixed32(const char* src) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(src[i]))
             << (8 * i);
  }
  return value;
}

// Reads a fixed64 from the front of *in and advances it. Returns false (and
// leaves *in unchanged) if fewer than 8 bytes remain.
inline bool GetFixed64(std::string_view* in, uint64_t* value) {
  if (in->size() < 8) return false;
  *value = DecodeFixed64(in->data());
  in->remove_prefix(8);
  return true;
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_CODING_H_
