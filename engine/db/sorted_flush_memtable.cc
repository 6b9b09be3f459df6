// Copyright (c) fencedkv authors.

#include "db/sorted_flush_memtable.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rocksdb/slice.h>

namespace fencedkv {
namespace {

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
  ~SortedIterator() override {
    if (release_) release_(this);
  }

  bool Valid() const override { return pos_ < v_.size(); }
  const char* key() const override { return v_[pos_]; }
  void Next() override { ++pos_; }
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
    // Still written to, or an entry we could not record: the hash-linklist
    // rep's own iterator (a skiplist of every entry).
    if (!read_only_.load(std::memory_order_acquire) || !complete_) {
      return inner_->GetIterator(arena);
    }
    std::call_once(sorted_once_, [this] { Sort(); });
    if (arena == nullptr) return new SortedIterator(entries_, cmp_);
    // RocksDB's Arena is not in its public headers: the iterator lives in
    // storage of ours, freed with the rep (which every iterator over it
    // outlives: RocksDB keeps the memtable while an iterator is open).
    // A destroyed iterator's storage is reused by the thread that destroyed
    // it (so never while another thread is still inside its destructor):
    // the storage is bounded by the iterators each thread has open at once,
    // not by how many were ever opened.
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
    return new (mem) SortedIterator(entries_, cmp_, [this](void* p) {
      std::lock_guard<std::mutex> lock(storage_mu_);
      free_storage_[std::this_thread::get_id()].push_back(p);
    });
  }

 private:
  // After an insert: remembers its entry (Allocate's buffer), unless the
  // handle is not the one Allocate returned last (then iterators fall back
  // to the hash-linklist rep's).
  void Record(KeyHandle handle) {
    if (handle == pending_handle_ && pending_entry_ != nullptr) {
      entries_.push_back(pending_entry_);
      list_bytes_.store(entries_.capacity() * sizeof(const char*),
                        std::memory_order_relaxed);
    } else {
      complete_ = false;
    }
    pending_handle_ = nullptr;
    pending_entry_ = nullptr;
  }

  // Sorts entries_ in the memtable's order (user key, then newest first).
  void Sort() {
    auto less = [this](const char* a, const char* b) { return cmp_(a, b) < 0; };
    if (!bytewise_ || entries_.size() < 2) {
      std::sort(entries_.begin(), entries_.end(), less);
      return;
    }
    // Bytewise keys: compare first the 8 bytes past the prefix every key
    // shares (zero-padded, big-endian: the integers order as the bytes do).
    // Equal windows (the same key's versions, or keys alike there) go to the
    // comparator.
    const Slice first = UserKeyOf(entries_[0]);
    size_t shared = first.size();
    for (const char* e : entries_) {
      const Slice k = UserKeyOf(e);
      const size_t m = std::min(shared, k.size());
      size_t i = 0;
      while (i < m && k[i] == first[i]) ++i;
      shared = i;
    }
    std::vector<std::pair<uint64_t, const char*>> keyed;
    keyed.reserve(entries_.size());
    for (const char* e : entries_) {
      const Slice k = UserKeyOf(e);
      uint64_t window = 0;
      for (size_t j = shared; j < shared + 8; ++j) {
        window = (window << 8) |
                 (j < k.size() ? static_cast<unsigned char>(k[j]) : 0u);
      }
      keyed.emplace_back(window, e);
    }
    std::sort(keyed.begin(), keyed.end(),
              [&less](const std::pair<uint64_t, const char*>& a,
                      const std::pair<uint64_t, const char*>& b) {
                if (a.first != b.first) return a.first < b.first;
                return less(a.second, b.second);
              });
    for (size_t i = 0; i < keyed.size(); ++i) entries_[i] = keyed[i].second;
  }

  const std::unique_ptr<MemTableRep> inner_;
  const KeyComparator& cmp_;
  const bool bytewise_;
  // Writer side (one writer at a time): the last Allocate, and every entry
  // inserted. entries_ is read by iterators only once read_only_ is set
  // (after the last insert), and sorted once, by the first of them.
  KeyHandle pending_handle_ = nullptr;
  char* pending_entry_ = nullptr;
  std::vector<const char*> entries_;
  bool complete_ = true;
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

}  // namespace fencedkv
