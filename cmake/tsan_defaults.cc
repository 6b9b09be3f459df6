// Copyright (c) fencedkv authors.
//
// ThreadSanitizer's defaults for every executable of a
// -DFENCEDKV_SANITIZE=thread build (linked in by the top CMakeLists.txt), so
// ctest, the e2e scripts and a hand-started fencedkv-server all run with the
// same settings; TSAN_OPTIONS still overrides them.
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
  return "detect_deadlocks=0 second_deadlock_stack=1";
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
      "race:rocksdb::RegisterCacheDeleterRole\n";
}
