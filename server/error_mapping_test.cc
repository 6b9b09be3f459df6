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
