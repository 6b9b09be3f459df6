// Copyright (c) fencedkv authors.
//
// Golden bytes of the on-disk format: a change here breaks existing
// databases and must come with a new format version.

#include "db/fence_format.h"

#include <gtest/gtest.h>

namespace fencedkv {
namespace format {

TEST(FenceFormatTest, DataRecordGoldenBytes) {
  char header[kMaxDataHeaderSize];
  size_t n = EncodeDataHeader(header, RecordKind::kValue, 300);
  EXPECT_EQ(std::string("\x01\xac\x02", 3), std::string(header, n));
  n = EncodeDataHeader(header, RecordKind::kNoValue, 7);
  EXPECT_EQ(std::string("\x00\x07", 2), std::string(header, n));
  n = EncodeDataHeader(header, RecordKind::kValue, ~0ull);
  EXPECT_EQ(std::string("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),
            std::string(header, n));
}

TEST(FenceFormatTest, DataRecordRoundTrip) {
  char header[kMaxDataHeaderSize];
  for (Token t :
       {Token{1}, Token{127}, Token{128}, Token{1} << 35, ~Token{0}}) {
    const size_t n = EncodeDataHeader(header, RecordKind::kValue, t);
    DataRecord rec;
    const std::string raw = std::string(header, n) + "v";  // rec views into it
    ASSERT_TRUE(DecodeDataRecord(raw, &rec));
    EXPECT_EQ(t, rec.token);
    EXPECT_EQ("v", rec.value);
  }
  const size_t hn = EncodeDataHeader(header, RecordKind::kValue, 42);
  std::string raw = std::string(header, hn) + "hello";
  DataRecord rec;
  ASSERT_TRUE(DecodeDataRecord(raw, &rec));
  EXPECT_EQ(RecordKind::kValue, rec.kind);
  EXPECT_EQ(42u, rec.token);
  EXPECT_EQ("hello", rec.value);
  // An empty value is a value.
  ASSERT_TRUE(DecodeDataRecord(std::string(header, hn), &rec));
  EXPECT_EQ(RecordKind::kValue, rec.kind);
  EXPECT_EQ("", rec.value);
}

TEST(FenceFormatTest, DecodeRefusesMalformedRecords) {
  DataRecord rec;
  EXPECT_FALSE(DecodeDataRecord("", &rec));
  EXPECT_FALSE(DecodeDataRecord(std::string("\x01", 1), &rec));      // no token
  EXPECT_FALSE(DecodeDataRecord(std::string("\x01\x80", 2), &rec));  // torn
  EXPECT_FALSE(DecodeDataRecord(std::string(11, '\xff'), &rec));     // bad kind
  // A token past 64 bits.
  EXPECT_FALSE(DecodeDataRecord(
      std::string("\x01") + std::string(9, '\xff') + "\x02", &rec));
  // A no-value record carries no bytes after its header.
  EXPECT_FALSE(DecodeDataRecord(std::string("\x00\x07x", 3), &rec));
  Token t = 5;
  EXPECT_FALSE(DecodeToken("1234567", &t));
  EXPECT_FALSE(DecodeToken("123456789", &t));
  EXPECT_EQ(5u, t);
  ASSERT_TRUE(DecodeToken(EncodeToken(~0ull), &t));
  EXPECT_EQ(~0ull, t);
}

TEST(FenceFormatTest, NamesAreStable) {
  EXPECT_STREQ("default", kDataColumnFamily);
  EXPECT_STREQ("fence", kFenceColumnFamily);
  EXPECT_STREQ("meta", kMetaColumnFamily);
  EXPECT_EQ("hwm/", kMetaHighWaterMarkPrefix);
  EXPECT_EQ("hwm/0000", HighWaterMarkKey(0));
  EXPECT_EQ("hwm/03ff", HighWaterMarkKey(1023));
  EXPECT_EQ("hwm/abcd", HighWaterMarkKey(0xabcd));
  EXPECT_EQ("hwm", kMetaLegacyHighWaterMark);
  EXPECT_EQ(2u, kFormatVersion);
}

}  // namespace format
}  // namespace fencedkv
