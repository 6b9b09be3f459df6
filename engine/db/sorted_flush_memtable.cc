// Copyright (c) fencedkv authors.

#include "db/sorted_flush_memtable.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <rocksdb/slice.h>

#include "util/coding.h"
#include "util/siphash.h"

namespace fencedkv {
namespace {

std::atomic<uint64_t> sorts_{0};
std::atomic<uint64_t> snapshot_sorts_{0};
// Each thread's own (a shared counter bumped by every Get would bounce its
// cache line between the cores).
thread_local uint64_t get_steps_ = 0;
// Tests: every Get takes the sorting path (as after an out-of-order
// insert).
std::atomic<bool> force_sorted_gets_{false};

using rocksdb::KeyHandle;
using rocksdb::MemTableRep;
using rocksdb::Slice;

// An entry's user key: its internal key without the 8-byte sequence and type.
Slice UserKeyOf(const char* entry) {
  const Slice ikey = rocksdb::GetLengthPrefixedSlice(entry);
  return Slice(ikey.data(), ikey.size() - 8);
}

// A LookupKey's memtable key (varint32 length, internal key) and user key.
// RocksDB's LookupKey is not in its public headers; every rep it ships reads
// these through its inline accessors, which return views of its first
// three members: start_ (the memtable key), kstart_ (the internal key),
// end_ (past both). They are read here as such, and checked against each
// other on every call (the memtable key's length prefix must lead to
// kstart_ and end_): a RocksDB of another layout stops the process here
// instead of reading the wrong bytes.
void LookupKeyParts(const rocksdb::LookupKey& k, const char** memtable_key,
                    Slice* user_key) {
  struct Layout {
    const char* start;
    const char* kstart;
    const char* end;
  };
  Layout parts;
  std::memcpy(&parts, &k, sizeof(parts));
  // (GetLengthPrefixedSlice reads at most the 5 bytes of a varint32.)
  const Slice ikey = parts.start == nullptr
                         ? Slice()
                         : rocksdb::GetLengthPrefixedSlice(parts.start);
  if (parts.start == nullptr || ikey.data() != parts.kstart ||
      ikey.size() < 8 || parts.end != parts.kstart + ikey.size()) {
    std::fprintf(stderr,
                 "fencedkv: rocksdb::LookupKey is not laid out as in RocksDB "
                 "7.8 (sorted_flush_memtable.cc): this build of fencedkv "
                 "cannot use this librocksdb\n");
    std::abort();
  }
  *memtable_key = parts.start;
  *user_key = Slice(parts.kstart, ikey.size() - 8);
}

// Iterates over a sorted vector of entries. Not thread-safe (one user, as
// every MemTableRep::Iterator).
class SortedIterator final : public MemTableRep::Iterator {
  static constexpr size_t kPrefetchAhead = 8;

 public:
  // `release`, if set, is called from the destructor with this object's
  // storage, to be reused (by the same thread: see SortedFlushRep).
  SortedIterator(const std::vector<const char*>& sorted,
                 const MemTableRep::KeyComparator& cmp,
                 std::function<void(void*)> release = nullptr)
      : v_(sorted),
        cmp_(cmp),
        pos_(sorted.size()),
        release_(std::move(release)) {}
  // Over a snapshot of its own (a memtable still being written).
  SortedIterator(std::vector<const char*>&& snapshot,
                 const MemTableRep::KeyComparator& cmp,
                 std::function<void(void*)> release = nullptr)
      : own_(std::move(snapshot)),
        v_(own_),
        cmp_(cmp),
        pos_(own_.size()),
        release_(std::move(release)) {}
  ~SortedIterator() override {
    if (release_) release_(this);
  }

  bool Valid() const override { return pos_ < v_.size(); }
  const char* key() const override { return v_[pos_]; }
  void Next() override {
    ++pos_;
    // The entries are in key order, which is random in memory: a flush
    // reading each one in turn missed the cache on every key() (a fifth of
    // the flush's CPU). The entry a few steps ahead is fetched meanwhile,
    // its first three cache lines (a 100-byte value's entry spans them).
    if (pos_ + kPrefetchAhead < v_.size()) {
      const char* ahead = v_[pos_ + kPrefetchAhead];
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + 64);
      __builtin_prefetch(ahead + 128);
    }
  }
  void Prev() override { pos_ = pos_ == 0 ? v_.size() : pos_ - 1; }
  void Seek(const Slice& internal_key, const char* memtable_key) override {
    pos_ = Bound(internal_key, memtable_key, /*upper=*/false);
  }
  void SeekForPrev(const Slice& internal_key,
                   const char* memtable_key) override {
    const size_t upper = Bound(internal_key, memtable_key, /*upper=*/true);
    pos_ = upper == 0 ? v_.size() : upper - 1;  // the last entry <= target
  }
  void SeekToFirst() override { pos_ = 0; }
  void SeekToLast() override { pos_ = v_.empty() ? 0 : v_.size() - 1; }

 private:
  // The first entry > target (upper), or >= target.
  size_t Bound(const Slice& internal_key, const char* memtable_key,
               bool upper) const {
    auto compare = [&](const char* entry) {
      return memtable_key != nullptr ? cmp_(entry, memtable_key)
                                     : cmp_(entry, internal_key);
    };
    size_t lo = 0, hi = v_.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      const int c = compare(v_[mid]);
      if (c < 0 || (upper && c == 0)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  const std::vector<const char*> own_;  // empty unless a snapshot's
  const std::vector<const char*>& v_;
  const MemTableRep::KeyComparator& cmp_;
  size_t pos_;
  std::function<void(void*)> release_;
};

// The rep: a hash index of the entries and the list of every entry in
// insertion order.
//
// The index. A bucket holds the newest entry of its chain, and 7 bits of
// that entry's key hash in the pointer's unused top bits. Each entry links
// to the next entry of another key (`next`) and to its own key's previous
// entry when that one was the chain's head as it was inserted (`older`):
// a key written again and again is one link of the chain, however many
// versions it has. An insert reads only its bucket (the 7 bits tell it
// whether the head is its own key: only then does it read the head, which
// the previous write of that key just touched). The hash-linklist rep this
// replaced kept each chain in key order, so every insert also read the
// chain's first entry: a second cache miss per key, which with the
// bucket's was about a fifth of a replica's apply thread (perf: two loads
// in HashLinkListRep::Insert).
//
// A Get walks the chain to its key's link and hands the versions to
// RocksDB newest first, stopping when RocksDB has what it needs: one link
// per other key in the bucket, one entry per version newer than the
// lookup's snapshot. That order holds because RocksDB inserts into a
// memtable in sequence order (one writer; recovery replays in order). An
// insert older than one before it is noted, and from then on a Get sorts
// all its key's entries first (never seen; correct either way).
//
// The hash is SipHash-1-3 under a per-process random key
// (util/siphash.h): no client can choose keys that share a bucket, so none
// can make a Get walk a long chain.
class SortedFlushRep final : public MemTableRep {
  // An entry in the memtable's arena, followed by the memtable entry
  // RocksDB writes (Allocate's buffer).
  struct Node {
    std::atomic<Node*> next;   // the chain's next entry of another key
    std::atomic<Node*> older;  // this key's previous entry, if adjacent
    char* entry() { return reinterpret_cast<char*>(this + 1); }
  };
  // The tag: the hash's top 7 bits, in the pointer's top 7 (unused by
  // user-space addresses on x86-64 and arm64 Linux, even with 5-level page
  // tables). A match says the head is probably the same key (1 in 128
  // otherwise), and only then is the head read.
  static constexpr int kTagShift = 57;
  static constexpr uintptr_t kPointerMask = (uintptr_t{1} << kTagShift) - 1;

 public:
  SortedFlushRep(const KeyComparator& cmp, rocksdb::Allocator* allocator,
                 size_t buckets, bool bytewise)
      : MemTableRep(allocator),
        cmp_(cmp),
        bytewise_(bytewise),
        mask_(buckets - 1),
        buckets_(NewBuckets(buckets)) {}

  ~SortedFlushRep() override {
    // The iterators placed here were destroyed by their users (RocksDB
    // calls ~Iterator() on an arena iterator, and frees nothing).
    for (void* p : iterator_storage_) ::operator delete(p);
  }

  KeyHandle Allocate(const size_t len, char** buf) override {
    Node* node = new (ArenaAligned(sizeof(Node) + len)) Node;
    *buf = node->entry();
    return node;
  }
  void Insert(KeyHandle handle) override {
    if (read_only_.load(std::memory_order_relaxed)) {
      // RocksDB never inserts into a read-only memtable; if it did, a sort
      // could be reading the list this writes.
      std::fprintf(stderr, "fencedkv: an insert into a read-only memtable\n");
      std::abort();
    }
    Node* node = static_cast<Node*>(handle);
    const Slice ikey = rocksdb::GetLengthPrefixedSlice(node->entry());
    const Slice user_key(ikey.data(), ikey.size() - 8);
    const uint64_t sequence = DecodeTag(ikey) >> 8;
    // (Relaxed: RocksDB orders its successive memtable writers itself.)
    const uint64_t last = last_sequence_.load(std::memory_order_relaxed);
    if (sequence < last) {
      out_of_order_.store(true, std::memory_order_release);
    } else {
      last_sequence_.store(sequence, std::memory_order_relaxed);
    }
    const uint64_t hash = MemtableKeyHash(user_key.data(), user_key.size());
    std::atomic<uintptr_t>& bucket = buckets_[hash & mask_];
    // One writer: the head read here is still the head when stored.
    const uintptr_t word = bucket.load(std::memory_order_relaxed);
    Node* head = Untag(word);
    const uintptr_t tag = hash >> kTagShift;
    if (head != nullptr && (word >> kTagShift) == tag &&
        UserKeyOf(head->entry()) == user_key) {
      node->next.store(head->next.load(std::memory_order_relaxed),
                       std::memory_order_relaxed);
      node->older.store(head, std::memory_order_relaxed);
    } else {
      node->next.store(head, std::memory_order_relaxed);
      node->older.store(nullptr, std::memory_order_relaxed);
    }
    const auto at = reinterpret_cast<uintptr_t>(node);
    if ((at & ~kPointerMask) != 0) {
      // (User-space addresses fit in 57 bits on x86-64 and arm64 Linux.)
      std::fprintf(stderr, "fencedkv: a memtable entry at %p, past 57 bits\n",
                   static_cast<void*>(node));
      std::abort();
    }
    const uintptr_t tagged = at | (tag << kTagShift);
    bucket.store(tagged, std::memory_order_release);  // the entry with it
    Record(node->entry());
  }
  bool Contains(const char* key) const override {
    bool found = false;
    const Slice user_key = UserKeyOf(key);
    Walk(BucketWord(user_key), user_key, [&](const char* entry) {
      found = cmp_(entry, key) == 0;
      return !found;
    });
    return found;
  }
  void MarkReadOnly() override {
    read_only_.store(true, std::memory_order_release);
  }
  void Get(const rocksdb::LookupKey& k, void* callback_args,
           bool (*callback_func)(void* arg, const char* entry)) override {
    const char* target;
    Slice user_key;
    LookupKeyParts(k, &target, &user_key);
    // The key's entries at or after the lookup key (its snapshot), in the
    // memtable's order: what a sorted rep's Seek and Next would give, up to
    // the next key (where RocksDB's callback stops anyway). The bucket is
    // loaded first: an insert sets out_of_order_ before it publishes its
    // entry, so a walk that can meet that entry sees the flag.
    const uintptr_t word = BucketWord(user_key);
    if (!out_of_order_.load(std::memory_order_acquire) &&
        !force_sorted_gets_.load(std::memory_order_relaxed)) {
      Walk(word, user_key, [&](const char* entry) {
        return cmp_(entry, target) < 0 || callback_func(callback_args, entry);
      });
      return;
    }
    std::vector<const char*> found;
    Walk(word, user_key, [&](const char* entry) {
      if (cmp_(entry, target) >= 0) found.push_back(entry);
      return true;
    });
    std::sort(found.begin(), found.end(),
              [this](const char* a, const char* b) { return cmp_(a, b) < 0; });
    for (const char* entry : found) {
      if (!callback_func(callback_args, entry)) return;
    }
  }
  void UniqueRandomSample(const uint64_t num_entries,
                          const uint64_t target_sample_size,
                          std::unordered_set<const char*>* entries) override {
    std::vector<const char*> all;
    CopyRecorded(&all);
    (void)num_entries;
    entries->clear();
    if (all.empty()) return;
    std::mt19937_64 rng(all.size());
    const size_t want = std::min<size_t>(target_sample_size, all.size());
    while (entries->size() < want) entries->insert(all[rng() % all.size()]);
  }
  size_t ApproximateMemoryUsage() override {
    // (The buckets and the entries are in the memtable's arena, which
    // RocksDB counts itself.)
    return list_bytes_.load(std::memory_order_relaxed);
  }
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    return GetIterator(arena);  // total order is a prefix order too
  }

  // For MemtableBuckets: the bucket array as opaque words.
  void* const* buckets() const {
    return reinterpret_cast<void* const*>(buckets_);
  }

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    if (!read_only_.load(std::memory_order_acquire)) {
      // Still written to: a sorted copy of the entries recorded so far.
      // Every entry this iterator must show is among them: RocksDB makes a
      // write's sequence number visible to readers only once its memtable
      // insert (and so Record) returned. Later ones carry later sequence
      // numbers, which the reader skips anyway.
      // (Made read-only meanwhile, it is still right, sorted once more.)
      std::vector<const char*> snapshot;
      CopyRecorded(&snapshot);
      snapshot_sorts_.fetch_add(1, std::memory_order_relaxed);
      SortEntries(&snapshot);
      return Place(arena, [&](void* mem) {
        return new (mem)
            SortedIterator(std::move(snapshot), cmp_, Releaser(arena));
      });
    }
    std::call_once(sorted_once_, [this] { Sort(); });
    return Place(arena, [&](void* mem) {
      return new (mem) SortedIterator(entries_, cmp_, Releaser(arena));
    });
  }

 private:
  // `bytes` of the memtable's arena, 8-byte aligned. (RocksDB's Allocator,
  // whose aligned allocation the built-in reps use, is not in its public
  // headers; MemTableRep::Allocate, which calls its unaligned one, is.)
  char* ArenaAligned(size_t bytes) {
    // Sizes in multiples of 8: every entry then starts 8-byte aligned
    // without padding. (Measured, not explained: with byte-exact sizes,
    // each padded to alignment, a replica's flush cost 0.55-0.67 us of CPU
    // per SET under SET -P 16 against 0.30-0.33 with these; RocksDB's
    // ConcurrentArena takes a multiple of 8 from the front of a per-core
    // shard and another size from the back.)
    const size_t rounded = (bytes + alignof(Node) - 1) & ~(alignof(Node) - 1);
    char* mem;
    MemTableRep::Allocate(rounded, &mem);
    if (reinterpret_cast<uintptr_t>(mem) % alignof(Node) == 0) return mem;
    // (Not expected: the arena's front stays aligned.)
    MemTableRep::Allocate(rounded + alignof(Node), &mem);
    const auto at = reinterpret_cast<uintptr_t>(mem);
    return mem + (alignof(Node) - at % alignof(Node));
  }
  std::atomic<uintptr_t>* NewBuckets(size_t n) {
    char* mem = ArenaAligned(n * sizeof(std::atomic<uintptr_t>));
    auto* buckets = reinterpret_cast<std::atomic<uintptr_t>*>(mem);
    for (size_t i = 0; i < n; ++i) {
      new (&buckets[i]) std::atomic<uintptr_t>(0);
    }
    return buckets;
  }
  static Node* Untag(uintptr_t word) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a tagged pointer's bits
    return reinterpret_cast<Node*>(word & kPointerMask);
  }
  // The internal key's last 8 bytes: sequence << 8 | type.
  static uint64_t DecodeTag(const Slice& internal_key) {
    return DecodeFixed64(internal_key.data() + internal_key.size() - 8);
  }
  uintptr_t BucketWord(const Slice& user_key) const {
    const uint64_t hash = MemtableKeyHash(user_key.data(), user_key.size());
    return buckets_[hash & mask_].load(std::memory_order_acquire);
  }
  // Calls visit(entry) for each entry of `user_key`, newest first as
  // inserted, until it returns false. Counts the entries it looks at.
  // `word`: the key's bucket, as loaded (acquire).
  template <typename Visit>
  static void Walk(uintptr_t word, const Slice& user_key, Visit visit) {
    uint64_t steps = 0;
    for (Node* link = Untag(word); link != nullptr;
         link = link->next.load(std::memory_order_acquire)) {
      ++steps;
      if (UserKeyOf(link->entry()) != user_key) continue;  // another key
      for (Node* v = link; v != nullptr;
           v = v->older.load(std::memory_order_acquire)) {
        if (v != link) ++steps;
        if (!visit(v->entry())) {
          get_steps_ += steps;
          return;
        }
      }
    }
    get_steps_ += steps;
  }

  // Without an arena, a heap iterator. RocksDB's Arena is not in its public
  // headers: with one, the iterator lives in storage of ours, freed with the
  // rep (which every iterator over it outlives: RocksDB keeps the memtable
  // while an iterator is open). A destroyed iterator's storage is reused by
  // the thread that destroyed it (so never while another thread is still
  // inside its destructor): the storage is bounded by the iterators each
  // thread has open at once, not by how many were ever opened.
  template <typename Make>
  Iterator* Place(rocksdb::Arena* arena, Make make) {
    if (arena == nullptr) return make(::operator new(sizeof(SortedIterator)));
    void* mem = nullptr;
    {
      std::lock_guard<std::mutex> lock(storage_mu_);
      auto& mine = free_storage_[std::this_thread::get_id()];
      if (!mine.empty()) {
        mem = mine.back();
        mine.pop_back();
      } else {
        mem = ::operator new(sizeof(SortedIterator));
        iterator_storage_.push_back(mem);
      }
    }
    return make(mem);
  }
  // A heap iterator is deleted (its storage freed by operator delete); an
  // arena one hands its storage back.
  std::function<void(void*)> Releaser(rocksdb::Arena* arena) {
    if (arena == nullptr) return nullptr;
    return [this](void* p) {
      std::lock_guard<std::mutex> lock(storage_mu_);
      free_storage_[std::this_thread::get_id()].push_back(p);
    };
  }

  // Appends the entries recorded so far to *out. Only the chunk pointers
  // are taken under chunks_mu_ (the writer takes it once per kChunk
  // inserts, and must not wait for a copy of megabytes); the chunks
  // themselves live as long as the rep.
  void CopyRecorded(std::vector<const char*>* out) {
    std::vector<const char* const*> chunks;
    size_t n;
    {
      std::lock_guard<std::mutex> lock(chunks_mu_);
      n = count_.load(std::memory_order_acquire);
      chunks.reserve(chunks_.size());
      for (const auto& c : chunks_) chunks.push_back(c.get());
    }
    out->reserve(n);
    for (size_t i = 0; i < n; i += kChunk) {
      const char* const* chunk = chunks[i / kChunk];
      out->insert(out->end(), chunk, chunk + std::min(kChunk, n - i));
    }
  }

  // After an insert: remembers its entry. The list grows by fixed chunks:
  // no insert copies what earlier ones recorded (a growing vector copied up
  // to the whole list, megabytes, inside one write).
  void Record(const char* entry) {
    // Only this (the one) writer changes count_ and chunks_; snapshots read
    // the chunk list under chunks_mu_, and entries below count_.
    const size_t count = count_.load(std::memory_order_relaxed);
    const size_t at = count % kChunk;
    if (at == 0) {
      std::lock_guard<std::mutex> lock(chunks_mu_);
      chunks_.emplace_back(new const char*[kChunk]);
      last_chunk_ = chunks_.back().get();
      list_bytes_.store(chunks_.size() * kChunk * sizeof(const char*) +
                            chunks_.capacity() * sizeof(chunks_[0]),
                        std::memory_order_relaxed);
    }
    last_chunk_[at] = entry;
    count_.store(count + 1, std::memory_order_release);
  }

  // Copies the recorded entries into entries_, in the memtable's order
  // (user key, then newest first). The chunks stay (a copy for an iterator
  // opened before may still be reading them) until the rep goes.
  void Sort() {
    // (Empty unless an earlier attempt threw, e.g. bad_alloc in the sort:
    // call_once then runs this again, and the copy must not be doubled.)
    entries_.clear();
    CopyRecorded(&entries_);
    // list_bytes_ stays: RocksDB requires a read-only memtable's reported
    // usage not to grow (entries_ is the size of the chunks it copies).
    sorts_.fetch_add(1, std::memory_order_relaxed);
    SortEntries(&entries_);
  }

  void SortEntries(std::vector<const char*>* entries) const {
    auto less = [this](const char* a, const char* b) { return cmp_(a, b) < 0; };
    if (!bytewise_ || entries->size() < 2) {
      std::sort(entries->begin(), entries->end(), less);
      return;
    }
    std::vector<std::pair<uint64_t, const char*>> keyed;
    keyed.reserve(entries->size());
    for (const char* e : *entries) keyed.emplace_back(0, e);
    SortBytewise(&keyed, 0, keyed.size(), 0, 0);
    for (size_t i = 0; i < keyed.size(); ++i) (*entries)[i] = keyed[i].second;
  }

  // Bytewise keys, most significant bytes first: (*v)[lo, hi) share their
  // first `offset` bytes. Past the further prefix they all share, 8 bytes
  // of each key (zero-padded, big-endian: the integers order as the bytes
  // do) are compared as one integer; each run of equal integers is sorted
  // the same way from 8 bytes further on, so one key unlike the others
  // costs its own comparisons only (a single prefix for all keys became
  // empty, and every comparison went to the comparator: 7 times slower).
  // Small runs, runs of keys no longer than the window (the same key's
  // versions), and runs past kMaxDepth windows go to the comparator.
  void SortBytewise(std::vector<std::pair<uint64_t, const char*>>* v, size_t lo,
                    size_t hi, size_t offset, int depth) const {
    auto less = [this](const char* a, const char* b) { return cmp_(a, b) < 0; };
    auto by_key = [&less](const std::pair<uint64_t, const char*>& a,
                          const std::pair<uint64_t, const char*>& b) {
      return less(a.second, b.second);
    };
    const auto begin = v->begin() + static_cast<std::ptrdiff_t>(lo);
    const auto end = v->begin() + static_cast<std::ptrdiff_t>(hi);
    if (hi - lo < kMinRadixRun || depth >= kMaxDepth) {
      std::sort(begin, end, by_key);
      return;
    }
    const Slice first = UserKeyOf((*v)[lo].second);
    size_t shared = first.size();
    size_t longest = 0;
    for (size_t i = lo; i < hi && (shared > offset || i == lo); ++i) {
      const Slice k = UserKeyOf((*v)[i].second);
      const size_t m = std::min(shared, k.size());
      size_t j = offset;
      while (j < m && k[j] == first[j]) ++j;
      shared = j;
    }
    shared = std::max(shared, offset);
    for (size_t i = lo; i < hi; ++i) {
      const Slice k = UserKeyOf((*v)[i].second);
      longest = std::max(longest, k.size());
      uint64_t window = 0;
      for (size_t j = shared; j < shared + 8; ++j) {
        window = (window << 8) |
                 (j < k.size() ? static_cast<unsigned char>(k[j]) : 0u);
      }
      (*v)[i].first = window;
    }
    if (longest <= shared) {  // all one key: its versions
      std::sort(begin, end, by_key);
      return;
    }
    SortByWindow(v, lo, hi);
    size_t run = lo;
    for (size_t i = lo + 1; i <= hi; ++i) {
      if (i < hi && (*v)[i].first == (*v)[run].first) continue;
      if (i - run > 1) {
        if (longest <= shared + 8) {
          // No key reaches past the window: equal windows are equal keys,
          // or keys that differ only in trailing zero bytes.
          std::sort(v->begin() + static_cast<std::ptrdiff_t>(run),
                    v->begin() + static_cast<std::ptrdiff_t>(i), by_key);
        } else {
          SortBytewise(v, run, i, shared + 8, depth + 1);
        }
      }
      run = i;
    }
  }

  static constexpr size_t kChunk = 4096;
  // (*v)[lo, hi) in the order of their windows (ties in any order: the
  // caller sorts each run of equal windows). A large range by an LSD radix
  // sort, a byte at a time, skipping the bytes all windows share: a flush's
  // std::sort of 400,000 windows was a fifth of the flush's CPU (perf,
  // SET -P 16), its comparisons mispredicted branches; the radix sort's
  // passes only stream through memory.
  static void SortByWindow(std::vector<std::pair<uint64_t, const char*>>* v,
                           size_t lo, size_t hi) {
    using Entry = std::pair<uint64_t, const char*>;
    Entry* a = v->data() + lo;
    const size_t n = hi - lo;
    if (n < kMinRadixSort) {
      std::sort(a, a + n, [](const Entry& x, const Entry& y) {
        return x.first < y.first;
      });
      return;
    }
    // counts[d][b]: windows whose byte d (0 the least significant) is b.
    std::vector<std::array<size_t, 256>> counts(8);  // zeroed
    for (size_t i = 0; i < n; ++i) {
      const uint64_t w = a[i].first;
      for (size_t d = 0; d < 8; ++d) ++counts[d][(w >> (8 * d)) & 0xff];
    }
    std::vector<Entry> scratch(n);
    Entry* from = a;
    Entry* to = scratch.data();
    for (size_t d = 0; d < 8; ++d) {
      std::array<size_t, 256>& c = counts[d];
      if (c[(from[0].first >> (8 * d)) & 0xff] == n) continue;  // all alike
      size_t at = 0;
      for (size_t& k : c) {  // counts to starting positions
        const size_t count = k;
        k = at;
        at += count;
      }
      for (size_t i = 0; i < n; ++i) {
        to[c[(from[i].first >> (8 * d)) & 0xff]++] = from[i];
      }
      std::swap(from, to);
    }
    if (from != a) std::copy(from, from + n, a);
  }

  static constexpr size_t kMinRadixSort = 2048;
  static constexpr size_t kMinRadixRun = 16;
  static constexpr int kMaxDepth = 8;  // 64 bytes of keys, then comparisons
  const KeyComparator& cmp_;
  const bool bytewise_;
  const size_t mask_;                      // the bucket count, less one
  std::atomic<uintptr_t>* const buckets_;  // in the arena; tagged Node*
  // The writer's: the highest sequence number inserted so far.
  std::atomic<uint64_t> last_sequence_{0};
  std::atomic<bool> out_of_order_{false};
  // Writer side (one writer at a time): every entry inserted (count_ of
  // them, in chunks_). An iterator over the memtable
  // still being written copies the first count_ (the chunk list read under
  // chunks_mu_: a new chunk may be added meanwhile) and sorts its copy. Once
  // read_only_ is set (after the last insert), the first iterator copies
  // them into entries_ and sorts them, once, for every later iterator.
  const char** last_chunk_ = nullptr;  // chunks_.back(), for the writer
  std::mutex chunks_mu_;
  std::vector<std::unique_ptr<const char*[]>> chunks_;  // chunks_mu_ to grow
  std::atomic<size_t> count_{0};
  std::vector<const char*> entries_;
  std::atomic<size_t> list_bytes_{0};
  std::atomic<bool> read_only_{false};
  std::once_flag sorted_once_;
  std::mutex storage_mu_;
  // Guarded by storage_mu_: every block allocated for an iterator, and the
  // ones free again, by the thread that freed them.
  std::vector<void*> iterator_storage_;
  std::unordered_map<std::thread::id, std::vector<void*>> free_storage_;
};

class SortedFlushHashRepFactory final : public rocksdb::MemTableRepFactory {
 public:
  SortedFlushHashRepFactory(size_t buckets, bool bytewise)
      : buckets_(RoundUpToPowerOfTwo(std::max<size_t>(buckets, 1))),
        bytewise_(bytewise) {}

  MemTableRep* CreateMemTableRep(const MemTableRep::KeyComparator& cmp,
                                 rocksdb::Allocator* allocator,
                                 const rocksdb::SliceTransform* /*transform*/,
                                 rocksdb::Logger* /*logger*/) override {
    return new SortedFlushRep(cmp, allocator, buckets_, bytewise_);
  }
  MemTableRep* CreateMemTableRep(const MemTableRep::KeyComparator& cmp,
                                 rocksdb::Allocator* allocator,
                                 const rocksdb::SliceTransform* transform,
                                 rocksdb::Logger* logger,
                                 uint32_t column_family_id) override {
    auto* rep = static_cast<SortedFlushRep*>(
        CreateMemTableRep(cmp, allocator, transform, logger));
    // The newest memtable of a column family is the one written next.
    if (column_family_id < kMaxHinted) {
      hints_[column_family_id].Set(rep->buckets(), buckets_ - 1);
    }
    return rep;
  }
  const char* Name() const override { return "FencedkvSortedFlushHashRep"; }
  const MemtableBuckets* Hint(uint32_t cf_id) const {
    return cf_id < kMaxHinted ? &hints_[cf_id] : nullptr;
  }

 private:
  static size_t RoundUpToPowerOfTwo(size_t n) {
    size_t p = 1;
    while (p < n) p <<= 1;
    return p;
  }
  static constexpr uint32_t kMaxHinted = 16;
  const size_t buckets_;
  const bool bytewise_;
  MemtableBuckets hints_[kMaxHinted];
};

}  // namespace

const MemtableBuckets* GetMemtableBuckets(
    const rocksdb::MemTableRepFactory* factory, uint32_t cf_id) {
  const auto* ours = dynamic_cast<const SortedFlushHashRepFactory*>(factory);
  return ours != nullptr ? ours->Hint(cf_id) : nullptr;
}

std::shared_ptr<rocksdb::MemTableRepFactory> NewSortedFlushHashRepFactory(
    size_t buckets, bool bytewise) {
  return std::make_shared<SortedFlushHashRepFactory>(buckets, bytewise);
}

uint64_t MemtableKeyHash(const char* key, size_t size) {
  static const SipKey& key_of_process = ProcessSipKey();
  return SipHash13(key_of_process, key, size);
}

void ForceSortedMemtableGetsForTesting(bool on) {
  force_sorted_gets_.store(on, std::memory_order_relaxed);
}

SortedFlushCounts GetSortedFlushCounts() {
  return SortedFlushCounts{sorts_.load(std::memory_order_relaxed),
                           snapshot_sorts_.load(std::memory_order_relaxed),
                           get_steps_};
}

}  // namespace fencedkv
