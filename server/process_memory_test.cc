// Copyright (c) fencedkv authors.

#include "process_memory.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <unistd.h>

namespace fencedkv {
namespace server {
namespace {

using Files = std::vector<std::string>;

// The files in order of name (the order they are read in does not matter:
// the lowest limit wins).
Files Sorted(Files files) {
  std::sort(files.begin(), files.end());
  return files;
}
// CgroupLimitFiles, sorted.
Files LimitFiles(const std::string& cgroup, const std::string& mountinfo) {
  return Sorted(CgroupLimitFiles(cgroup, mountinfo));
}

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
// /sys/fs/cgroup, its cgroup a systemd service. (No v1 mount: v1's usual
// place, at its root, which does not exist here.)
TEST(CgroupLimitFilesTest, V2ServiceAndItsAncestors) {
  const std::string mountinfo =
      kRootFs + Mount("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate");
  EXPECT_EQ(Sorted({"/sys/fs/cgroup/system.slice/x.service/memory.max",
                    "/sys/fs/cgroup/system.slice/memory.max",
                    "/sys/fs/cgroup/memory.max",
                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            LimitFiles("0::/system.slice/x.service\n", mountinfo));
  EXPECT_EQ(Sorted({"/sys/fs/cgroup/memory.max",
                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            LimitFiles("0::/\n", mountinfo));
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
  // (No cgroup2 mount: v2's usual place, which does not exist here.)
  EXPECT_EQ(
      Sorted({"/sys/fs/cgroup/memory/job/memory.limit_in_bytes",
              "/sys/fs/cgroup/memory/memory.limit_in_bytes",
              "/sys/fs/cgroup/docker/abc/job/memory.max",
              "/sys/fs/cgroup/docker/abc/memory.max",
              "/sys/fs/cgroup/docker/memory.max", "/sys/fs/cgroup/memory.max"}),
      LimitFiles(cgroup, mountinfo));
}

// Mount points with escaped spaces; a v1 mount that lists memory among
// other controllers; a mount of another cgroup (a sibling, a child) is not
// this process's limit and is not read.
TEST(CgroupLimitFilesTest, EscapesCombinedControllersAndOtherCgroups) {
  const std::string mountinfo =
      kRootFs +
      Mount("/", "/mnt/my\\040cgroups", "cgroup", "rw,memory,hugetlb") +
      Mount("/other", "/elsewhere", "cgroup", "rw,memory") +
      Mount("/a/b/c", "/run/w", "cgroup", "rw,memory");
  EXPECT_EQ(Sorted({"/mnt/my cgroups/a/b/memory.limit_in_bytes",
                    "/mnt/my cgroups/a/memory.limit_in_bytes",
                    "/mnt/my cgroups/memory.limit_in_bytes",
                    "/sys/fs/cgroup/memory.max"}),
            LimitFiles("5:hugetlb,memory:/a/b\n", mountinfo));
  // "/otherwise" is not under "/other".
  EXPECT_EQ(Sorted({"/mnt/my cgroups/otherwise/memory.limit_in_bytes",
                    "/mnt/my cgroups/memory.limit_in_bytes",
                    "/sys/fs/cgroup/memory.max"}),
            LimitFiles("5:memory:/otherwise\n", mountinfo));
  // Under "/other": its mount shows it too.
  EXPECT_EQ(
      Sorted({"/mnt/my cgroups/other/x/memory.limit_in_bytes",
              "/mnt/my cgroups/other/memory.limit_in_bytes",
              "/mnt/my cgroups/memory.limit_in_bytes",
              "/elsewhere/x/memory.limit_in_bytes",
              "/elsewhere/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"}),
      LimitFiles("5:memory:/other/x\n", mountinfo));
}

// Hybrid systemd (v2 at /sys/fs/cgroup/unified, memory on v1), and a
// process outside its namespace's root ("/../.."), which no mount shows:
// no file is its own.
TEST(CgroupLimitFilesTest, HybridAndOutsideTheNamespace) {
  const std::string mountinfo =
      kRootFs +
      Mount("/", "/sys/fs/cgroup/unified", "cgroup2", "rw,nsdelegate") +
      Mount("/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory");
  const std::string cgroup = "4:memory:/user.slice\n0::/user.slice\n";
  const Files expect =
      Sorted({"/sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes",
              "/sys/fs/cgroup/memory/memory.limit_in_bytes",
              "/sys/fs/cgroup/unified/user.slice/memory.max",
              "/sys/fs/cgroup/unified/memory.max"});
  EXPECT_EQ(expect, LimitFiles(cgroup, mountinfo));
  EXPECT_EQ(Files{}, LimitFiles("0::/../../x\n4:memory:/..\n", mountinfo));
  // v1's memory not a cgroup mount (another file system there): its usual
  // place, as before.
  EXPECT_EQ(expect,
            LimitFiles(cgroup, kRootFs +
                                   Mount("/", "/sys/fs/cgroup/unified",
                                         "cgroup2", "rw") +
                                   "41 30 0:40 / /sys/fs/cgroup/memory rw - "
                                   "fuse lxcfs rw\n"));
}

// No readable mountinfo (or no cgroup mount in it): the usual mount
// points, each assumed to mount the root. Garbage lines are skipped.
TEST(CgroupLimitFilesTest, UsualMountPointsWithoutMountinfo) {
  EXPECT_EQ(Sorted({"/sys/fs/cgroup/a/memory.max", "/sys/fs/cgroup/memory.max",
                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            LimitFiles("0::/a\nnonsense\n7:\n::\n", ""));
  // No /proc/self/cgroup either: the roots.
  EXPECT_EQ(Sorted({"/sys/fs/cgroup/memory.max",
                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"}),
            LimitFiles("", kRootFs + "short line - cgroup2\n"));
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
