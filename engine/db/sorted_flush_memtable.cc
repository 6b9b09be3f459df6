// Copyright (c) fencedkv authors.

#include "db/sorted_flush_memtable.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rocksdb/slice.h>

namespace fencedkv {
namespace {

std::atomic<uint64_t> sorts_{0};
std::atomic<uint64_t> fallbacks_{0};
std::atomic<uint64_t> snapshot_sorts_{0};

using rocksdb::KeyHandle;
using rocksdb::MemTableRep;
using rocksdb::Slice;

// An entry's user key: its internal key without the 8-byte sequence and type.
Slice UserKeyOf(const char* entry) {
  const Slice ikey = rocksdb::GetLengthPrefixedSlice(entry);
  return Slice(ikey.data(), ikey.size() - 8);
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

class SortedFlushRep final : public MemTableRep {
 public:
  SortedFlushRep(MemTableRep* inner, const KeyComparator& cmp,
                 rocksdb::Allocator* allocator, bool bytewise)
      : MemTableRep(allocator), inner_(inner), cmp_(cmp), bytewise_(bytewise) {}

  ~SortedFlushRep() override {
    // The iterators placed here were destroyed by their users (RocksDB
    // calls ~Iterator() on an arena iterator, and frees nothing).
    for (void* p : iterator_storage_) ::operator delete(p);
  }

  KeyHandle Allocate(const size_t len, char** buf) override {
    KeyHandle handle = inner_->Allocate(len, buf);
    pending_handle_ = handle;
    pending_entry_ = *buf;
    return handle;
  }
  void Insert(KeyHandle handle) override {
    inner_->Insert(handle);
    Record(handle);
  }
  bool InsertKey(KeyHandle handle) override {
    if (!inner_->InsertKey(handle)) return false;
    Record(handle);
    return true;
  }
  bool Contains(const char* key) const override {
    return inner_->Contains(key);
  }
  void MarkReadOnly() override {
    inner_->MarkReadOnly();
    read_only_.store(true, std::memory_order_release);
  }
  void MarkFlushed() override { inner_->MarkFlushed(); }
  void Get(const rocksdb::LookupKey& k, void* callback_args,
           bool (*callback_func)(void* arg, const char* entry)) override {
    inner_->Get(k, callback_args, callback_func);
  }
  uint64_t ApproximateNumEntries(const Slice& start_ikey,
                                 const Slice& end_key) override {
    return inner_->ApproximateNumEntries(start_ikey, end_key);
  }
  void UniqueRandomSample(const uint64_t num_entries,
                          const uint64_t target_sample_size,
                          std::unordered_set<const char*>* entries) override {
    inner_->UniqueRandomSample(num_entries, target_sample_size, entries);
  }
  size_t ApproximateMemoryUsage() override {
    return inner_->ApproximateMemoryUsage() +
           list_bytes_.load(std::memory_order_relaxed);
  }
  bool IsMergeOperatorSupported() const override {
    return inner_->IsMergeOperatorSupported();
  }
  bool IsSnapshotSupported() const override {
    return inner_->IsSnapshotSupported();
  }
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    return inner_->GetDynamicPrefixIterator(arena);
  }

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    // An entry we could not record: the hash-linklist rep's own iterator
    // (a skiplist of every entry).
    if (!complete_.load(std::memory_order_acquire)) {
      fallbacks_.fetch_add(1, std::memory_order_relaxed);
      return inner_->GetIterator(arena);
    }
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

  // After an insert: remembers its entry (Allocate's buffer), unless the
  // handle is not the one Allocate returned last (then iterators fall back
  // to the hash-linklist rep's). The list grows by fixed chunks: no insert
  // copies what earlier ones recorded (a growing vector copied up to the
  // whole list, megabytes, inside one write).
  void Record(KeyHandle handle) {
    if (read_only_.load(std::memory_order_relaxed)) {
      // RocksDB never inserts into a read-only memtable; if it did, a sort
      // could be reading the list this writes.
      std::fprintf(stderr, "fencedkv: an insert into a read-only memtable\n");
      std::abort();
    }
    if (handle == pending_handle_ && pending_entry_ != nullptr) {
      // Only this (the one) writer changes count_ and chunks_; snapshots
      // read the chunk list under chunks_mu_, and entries below count_.
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
      last_chunk_[at] = pending_entry_;
      count_.store(count + 1, std::memory_order_release);
    } else {
      complete_.store(false, std::memory_order_release);
    }
    pending_handle_ = nullptr;
    pending_entry_ = nullptr;
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
  const std::unique_ptr<MemTableRep> inner_;
  const KeyComparator& cmp_;
  const bool bytewise_;
  // Writer side (one writer at a time): the last Allocate, and every entry
  // inserted (count_ of them, in chunks_). An iterator over the memtable
  // still being written copies the first count_ (the chunk list read under
  // chunks_mu_: a new chunk may be added meanwhile) and sorts its copy. Once
  // read_only_ is set (after the last insert), the first iterator copies
  // them into entries_ and sorts them, once, for every later iterator.
  KeyHandle pending_handle_ = nullptr;
  char* pending_entry_ = nullptr;
  const char** last_chunk_ = nullptr;  // chunks_.back(), for the writer
  std::mutex chunks_mu_;
  std::vector<std::unique_ptr<const char*[]>> chunks_;  // chunks_mu_ to grow
  std::atomic<size_t> count_{0};
  std::vector<const char*> entries_;
  std::atomic<bool> complete_{true};
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
      : inner_(rocksdb::NewHashLinkListRepFactory(buckets)),
        bytewise_(bytewise) {}

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  MemTableRep* CreateMemTableRep(const MemTableRep::KeyComparator& cmp,
                                 rocksdb::Allocator* allocator,
                                 const rocksdb::SliceTransform* transform,
                                 rocksdb::Logger* logger) override {
    return new SortedFlushRep(
        inner_->CreateMemTableRep(cmp, allocator, transform, logger), cmp,
        allocator, bytewise_);
  }
  const char* Name() const override { return "FencedkvSortedFlushHashRep"; }

 private:
  const std::unique_ptr<rocksdb::MemTableRepFactory> inner_;
  const bool bytewise_;
};

}  // namespace

std::shared_ptr<rocksdb::MemTableRepFactory> NewSortedFlushHashRepFactory(
    size_t buckets, bool bytewise) {
  return std::make_shared<SortedFlushHashRepFactory>(buckets, bytewise);
}

SortedFlushCounts GetSortedFlushCounts() {
  return SortedFlushCounts{sorts_.load(std::memory_order_relaxed),
                           fallbacks_.load(std::memory_order_relaxed),
                           snapshot_sorts_.load(std::memory_order_relaxed)};
}

}  // namespace fencedkv
