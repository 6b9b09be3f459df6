// Copyright (c) fencedkv authors.
//
// ThreadSanitizer's defaults for every executable of a
// -DFENCEDKV_SANITIZE=thread build (linked in by the top CMakeLists.txt), so
// ctest, the e2e scripts and a hand-started fencedkv-server all run with the
// same settings; TSAN_OPTIONS still overrides them.
//
// RocksDB is Debian's build, not instrumented: TSan sees its locks (pthread
// interceptors) but not the std::atomic flags and reference counts it also
// orders its threads with.
//
// ignore_noninstrumented_modules=1: the memory accesses uninstrumented code
// makes through interceptors (memcpy, memcmp, free, pread, close, called from
// librocksdb, libsnappy or libstdc++.so) are not checked; their pthread
// calls still are. Without it TSan reports RocksDB against itself on every
// version switch (a Get's memcmp on file metadata that a background thread
// frees), table cache eviction (pread against close) and group commit.
// What it costs, std::string code that runs in libstdc++.so, the TSan build
// gets back with -D_GLIBCXX_ASSERTIONS (see CMakeLists.txt): std::string is
// then compiled, instrumented, into our executables, and RocksDB's string
// operations bind to those copies too.
//
// detect_deadlocks=0: TSan's lock-order detector holds at most 64 locks per
// thread and aborts ("CHECK failed: sanitizer_deadlock_detector.h:67") when a
// thread holds more. A fenced write locks the stripes of every domain it
// touches (up to all 1024, always in ascending order, see
// engine/db/fence_table.h), and SetFenceFloor locks them all, so the
// detector cannot run on this code; data races are still reported.
//
// A report fails the run (exit code 66). The suppressions below name single
// RocksDB functions, never a whole library, so a race between fencedkv's own
// threads is reported even when RocksDB code is on its stack.

extern "C" const char* __tsan_default_options() {
  return "detect_deadlocks=0 second_deadlock_stack=1 "
         "ignore_noninstrumented_modules=1";
}

extern "C" const char* __tsan_default_suppressions() {
  return
      // RocksDB's process-wide cache-entry-role map: created by the first
      // DB::Open (main thread), then locked by RocksDB's stats thread. The
      // hand-over happens inside Debian's uninstrumented librocksdb (a
      // function-local static), which TSan cannot see, so it reports the
      // map's allocation as racing with its mutex. Both frames are RocksDB
      // internals that fencedkv never calls directly.
      "race:rocksdb::CopyCacheDeleterRoleMap\n"
      "race:rocksdb::RegisterCacheDeleterRole\n"
      // Group commit: the leader of a RocksDB write group appends the
      // followers' batches into its merged batch (a string it reuses from
      // group to group, instrumented through -D_GLIBCXX_ASSERTIONS); the
      // next group's leader, another thread, does the same once the
      // previous group is done, ordered by WriteThread's atomic state.
      // Both accesses are RocksDB's, on RocksDB's own string.
      "race:rocksdb::WriteBatchInternal::Append\n";
}
