// Copyright (c) fencedkv authors.
//
// The one Status -> "-CODE message" table.

#include "error_mapping.h"

#include <gtest/gtest.h>

namespace fencedkv {
namespace server {

TEST(ErrorMappingTest, StaleTokenHasItsOwnCode) {
  StaleTokenInfo info;
  info.offered = 7;
  info.max = 8;
  info.domain = "k";
  EXPECT_EQ("STALE token 7 < max 8 (domain \"k\")",
            ErrorLine(Status::StaleToken(info)));
  info.reason = StaleReason::kNotAboveMax;
  info.offered = 8;
  EXPECT_EQ("STALE token 8 <= max 8 (domain \"k\")",
            ErrorLine(Status::StaleToken(info)));
  info.reason = StaleReason::kBelowFloor;
  info.offered = 3;
  info.max = 5;
  info.batch_index = 1;
  EXPECT_EQ("STALE token 3 < floor 5 (domain \"k\") at command 2",
            ErrorLine(Status::StaleToken(info), /*with_command_index=*/true));
  EXPECT_EQ("STALE token 3 < floor 5 (domain \"k\")",
            ErrorLine(Status::StaleToken(info)));
}

// A domain is named with at most 256 of its bytes: a 64 KiB binary key
// made a 256 KiB -STALE line (each byte escaped as \xNN).
TEST(ErrorMappingTest, ALongDomainIsCutInTheLine) {
  StaleTokenInfo info;
  info.offered = 7;
  info.max = 8;
  info.domain = std::string(65536, '\x01');
  std::string cut;
  for (int i = 0; i < 256; ++i) cut += "\\x01";
  const std::string want =
      "STALE token 7 < max 8 (domain \"" + cut + "...(65536 bytes)\")";
  EXPECT_EQ(want, ErrorLine(Status::StaleToken(info)));
  EXPECT_EQ(65536u, Status::StaleToken(info).stale()->domain.size());
  EXPECT_LT(Status::StaleToken(info).ToString().size(), 1200u);
  info.domain = std::string(256, 'a');  // at the bound: whole
  EXPECT_EQ("STALE token 7 < max 8 (domain \"" + info.domain + "\")",
            ErrorLine(Status::StaleToken(info)));
}

TEST(ErrorMappingTest, Table) {
  EXPECT_EQ("ERR bad", ErrorLine(Status::InvalidArgument("bad")));
  EXPECT_EQ("LEASED x", ErrorLine(Status::LeaseHeld("x")));
  EXPECT_EQ("LEASELOST x", ErrorLine(Status::LeaseLost("x")));
  EXPECT_EQ("BUSY x", ErrorLine(Status::Busy("x")));
  EXPECT_EQ("SHUTDOWN x", ErrorLine(Status::Shutdown("x")));
  EXPECT_EQ("IOERR disk: full", ErrorLine(Status::IOError("disk", "full")));
  EXPECT_EQ("TOKENSKEW token 9 is too high",
            ErrorLine(Status::TokenSkew("token 9 is too high")));
  EXPECT_EQ("CORRUPTION x", ErrorLine(Status::Corruption("x")));
  EXPECT_EQ("ERR x", ErrorLine(Status::NotSupported("x")));
}

}  // namespace server
}  // namespace fencedkv
