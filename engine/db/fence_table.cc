// Copyright (c) fencedkv authors.

#include "db/fence_table.h"

namespace fencedkv {

namespace {
size_t RoundUpPow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
}  // namespace

FenceTable::FenceTable(size_t num_stripes, size_t cache_bytes)
    : mask_(RoundUpPow2(num_stripes == 0 ? 1 : num_stripes) - 1),
      stripe_capacity_(cache_bytes / (mask_ + 1)),
      stripes_(new Stripe[mask_ + 1]) {}

FenceTable::~FenceTable() = default;

void FenceTable::LockAll() NO_THREAD_SAFETY_ANALYSIS {
  for (size_t i = 0; i <= mask_; ++i) stripes_[i].mu.lock();
}

void FenceTable::UnlockAll() NO_THREAD_SAFETY_ANALYSIS {
  for (size_t i = mask_ + 1; i-- > 0;) stripes_[i].mu.unlock();
}

bool FenceTable::Lookup(size_t stripe, std::string_view domain,
                        Token* max) NO_THREAD_SAFETY_ANALYSIS {
  Stripe& s = stripes_[stripe];
  auto it = s.index.find(domain);
  if (it == s.index.end()) return false;
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  *max = it->second->max;
  return true;
}

void FenceTable::Insert(size_t stripe, std::string_view domain,
                        Token max) NO_THREAD_SAFETY_ANALYSIS {
  if (stripe_capacity_ == 0) return;
  Stripe& s = stripes_[stripe];
  auto it = s.index.find(domain);
  if (it != s.index.end()) {
    it->second->max = max;
    s.lru.splice(s.lru.begin(), s.lru, it->second);
    return;
  }
  const size_t charge = Charge(domain);
  while (!s.lru.empty() && s.charge + charge > stripe_capacity_) {
    Entry& victim = s.lru.back();
    s.charge -= Charge(victim.domain);
    s.index.erase(std::string_view(victim.domain));
    s.lru.pop_back();
  }
  if (charge > stripe_capacity_) return;  // larger than the whole stripe
  s.lru.push_front(Entry{std::string(domain), max});
  s.index.emplace(std::string_view(s.lru.front().domain), s.lru.begin());
  s.charge += charge;
}

void FenceTable::Erase(size_t stripe,
                       std::string_view domain) NO_THREAD_SAFETY_ANALYSIS {
  Stripe& s = stripes_[stripe];
  auto it = s.index.find(domain);
  if (it == s.index.end()) return;
  s.charge -= Charge(it->second->domain);
  List::iterator entry = it->second;
  s.index.erase(it);
  s.lru.erase(entry);
}

size_t FenceTable::ApproximateMemoryUsage() NO_THREAD_SAFETY_ANALYSIS {
  size_t total = 0;
  for (size_t i = 0; i <= mask_; ++i) {
    std::lock_guard<std::mutex> lock(stripes_[i].mu);
    total += stripes_[i].charge;
  }
  return total;
}

}  // namespace fencedkv
