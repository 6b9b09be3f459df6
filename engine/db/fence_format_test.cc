// Copyright (c) fencedkv authors.
//
// Golden bytes of the on-disk format: a change here breaks existing
// databases and must come with a new format version.

#include "db/fence_format.h"

#include <gtest/gtest.h>

namespace fencedkv {
namespace format {

TEST(FenceFormatTest, DataRecordGoldenBytes) {
  char header[kDataHeaderSize];
  EncodeDataHeader(header, RecordKind::kValue, 0x0102030405060708ull);
  EXPECT_EQ(std::string("\x01\x08\x07\x06\x05\x04\x03\x02\x01", 9),
            std::string(header, 9));
  EncodeDataHeader(header, RecordKind::kNoValue, 7);
  EXPECT_EQ(std::string("\x00\x07\x00\x00\x00\x00\x00\x00\x00", 9),
            std::string(header, 9));
}

TEST(FenceFormatTest, DataRecordRoundTrip) {
  char header[kDataHeaderSize];
  EncodeDataHeader(header, RecordKind::kValue, 42);
  std::string raw = std::string(header, 9) + "hello";
  DataRecord rec;
  ASSERT_TRUE(DecodeDataRecord(raw, &rec));
  EXPECT_EQ(RecordKind::kValue, rec.kind);
  EXPECT_EQ(42u, rec.token);
  EXPECT_EQ("hello", rec.value);
  // An empty value is a value.
  ASSERT_TRUE(DecodeDataRecord(std::string(header, 9), &rec));
  EXPECT_EQ(RecordKind::kValue, rec.kind);
  EXPECT_EQ("", rec.value);
}

TEST(FenceFormatTest, DecodeRefusesMalformedRecords) {
  DataRecord rec;
  EXPECT_FALSE(DecodeDataRecord("", &rec));
  EXPECT_FALSE(DecodeDataRecord(std::string("\x01\x00\x00", 3), &rec));
  EXPECT_FALSE(DecodeDataRecord(std::string(9, '\x07'), &rec));  // bad kind
  // A no-value record carries no bytes after its header.
  EXPECT_FALSE(DecodeDataRecord(std::string(9, '\x00') + "x", &rec));
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
  EXPECT_EQ("hwm", kMetaHighWaterMark);
  EXPECT_EQ(1u, kFormatVersion);
}

}  // namespace format
}  // namespace fencedkv
