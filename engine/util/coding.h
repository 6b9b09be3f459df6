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

// Varint64: 7 bits per byte, low bits first, high bit = "more". At most
// kMaxVarint64Length bytes. Returns the byte past the last one written.
constexpr size_t kMaxVarint64Length = 10;
inline char* EncodeVarint64(char* dst, uint64_t v) {
  auto* p = reinterpret_cast<unsigned char*>(dst);
  while (v >= 0x80) {
    *p++ = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<unsigned char>(v);
  return reinterpret_cast<char*>(p);
}

// Reads a varint64 from the front of *in and advances it. Returns false (and
// leaves *in unchanged) on a truncated or over-long encoding.
inline bool GetVarint64(std::string_view* in, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0, shift = 0; i < in->size() && shift <= 63;
       ++i, shift += 7) {
    const uint64_t byte = static_cast<unsigned char>((*in)[i]);
    if (shift == 63 && byte > 1) return false;  // overflows 64 bits
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      in->remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

}  // namespace fencedkv

#endif  // FENCEDKV_ENGINE_UTIL_CODING_H_
