// Copyright (c) fencedkv authors.

#include "process_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace fencedkv {
namespace server {
namespace {

using Files = std::vector<std::string>;

// A mountinfo line of a cgroup mount.
std::string Mount(const std::string& root, const std::string& point,
                  const std::string& type, const std::string& super) {
  return "30 25 0:26 " + root + " " + point +
         " rw,nosuid,nodev,noexec,relatime shared:4 - " + type + " " + type +
         " " + super + "\n";
}

const std::string kRootFs =
    "25 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n";

// A host, or a container with its own cgroup namespace: v2 at
// /sys/fs/cgroup, its cgroup a systemd service.
TEST(CgroupLimitFilesTest, V2ServiceAndItsAncestors) {
  const std::string mountinfo =
      kRootFs + Mount("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate");
  EXPECT_EQ((Files{"/sys/fs/cgroup/system.slice/x.service/memory.max",
                   "/sys/fs/cgroup/system.slice/memory.max",
                   "/sys/fs/cgroup/memory.max"}),
            CgroupLimitFiles("0::/system.slice/x.service\n", mountinfo));
  EXPECT_EQ((Files{"/sys/fs/cgroup/memory.max"}),
            CgroupLimitFiles("0::/\n", mountinfo));
}

// The gap this closes: a v1 container sharing the host's cgroup
// namespace sees its full path in /proc/self/cgroup, but the mount shows
// its own cgroup at the mount point. A nested group's limit was missed
// (the path was looked up under the mount point as if it mounted the
// root).
TEST(CgroupLimitFilesTest, V1MountOfAContainersOwnCgroup) {
  const std::string mountinfo =
      kRootFs +
      Mount("/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory") +
      Mount("/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup",
            "rw,cpu,cpuacct");
  const std::string cgroup =
      "12:cpu,cpuacct:/docker/abc/job\n"
      "11:memory:/docker/abc/job\n"
      "1:name=systemd:/docker/abc/job\n"
      "0::/docker/abc/job\n";
  EXPECT_EQ((Files{"/sys/fs/cgroup/memory/job/memory.limit_in_bytes",
                   "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            CgroupLimitFiles(cgroup, mountinfo));
}

// Mount points with escaped spaces; a v1 mount that lists memory among
// other controllers; a mount of another cgroup is no guide.
TEST(CgroupLimitFilesTest, EscapesCombinedControllersAndOtherCgroups) {
  const std::string mountinfo =
      kRootFs +
      Mount("/", "/mnt/my\\040cgroups", "cgroup", "rw,memory,hugetlb") +
      Mount("/other", "/elsewhere", "cgroup", "rw,memory");
  EXPECT_EQ((Files{"/mnt/my cgroups/a/b/memory.limit_in_bytes",
                   "/mnt/my cgroups/a/memory.limit_in_bytes",
                   "/mnt/my cgroups/memory.limit_in_bytes",
                   "/elsewhere/memory.limit_in_bytes"}),
            CgroupLimitFiles("5:hugetlb,memory:/a/b\n", mountinfo));
  // "/otherwise" is not under "/other".
  EXPECT_EQ((Files{"/mnt/my cgroups/otherwise/memory.limit_in_bytes",
                   "/mnt/my cgroups/memory.limit_in_bytes",
                   "/elsewhere/memory.limit_in_bytes"}),
            CgroupLimitFiles("5:memory:/otherwise\n", mountinfo));
}

// Hybrid systemd (v2 at /sys/fs/cgroup/unified, memory on v1), and a
// process outside its namespace's root ("/../.."), which no mount shows.
TEST(CgroupLimitFilesTest, HybridAndOutsideTheNamespace) {
  const std::string mountinfo =
      kRootFs +
      Mount("/", "/sys/fs/cgroup/unified", "cgroup2", "rw,nsdelegate") +
      Mount("/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory");
  EXPECT_EQ(
      (Files{"/sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes",
             "/sys/fs/cgroup/memory/memory.limit_in_bytes",
             "/sys/fs/cgroup/unified/user.slice/memory.max",
             "/sys/fs/cgroup/unified/memory.max"}),
      CgroupLimitFiles("4:memory:/user.slice\n0::/user.slice\n", mountinfo));
  EXPECT_EQ((Files{"/sys/fs/cgroup/unified/memory.max",
                   "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            CgroupLimitFiles("0::/../../x\n4:memory:/..\n", mountinfo));
}

// No readable mountinfo (or no cgroup mount in it): the usual mount
// points, each assumed to mount the root. Garbage lines are skipped.
TEST(CgroupLimitFilesTest, UsualMountPointsWithoutMountinfo) {
  EXPECT_EQ((Files{"/sys/fs/cgroup/a/memory.max", "/sys/fs/cgroup/memory.max",
                   "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            CgroupLimitFiles("0::/a\nnonsense\n7:\n::\n", ""));
  EXPECT_EQ((Files{"/sys/fs/cgroup/memory.max",
                   "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            CgroupLimitFiles("", kRootFs + "short line - cgroup2\n"));
}

TEST(CgroupLimitFilesTest, AvailableMemoryIsAtMostTheMachines) {
  const size_t bytes = AvailableMemory();
  EXPECT_GT(bytes, size_t{0});
  EXPECT_LE(bytes, static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) *
                       static_cast<size_t>(sysconf(_SC_PAGESIZE)));
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
