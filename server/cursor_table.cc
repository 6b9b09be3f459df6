// Copyright (c) fencedkv authors.

#include "cursor_table.h"

namespace fencedkv {
namespace server {

uint64_t CursorTable::Save(uint64_t owner, std::string next_key,
                           std::unique_ptr<Iterator> iterator) {
  std::vector<std::unique_ptr<Iterator>> dropped;  // freed after unlocking
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (iterator != nullptr) {
    ReleaseParked(now, limits_.max_parked - 1, &dropped);
  }
  const uint64_t id = next_id_++;
  if (iterator != nullptr) parked_.insert(id);
  bytes_ += next_key.size() + kOverhead;
  cursors_.emplace(
      id, Cursor{owner, std::move(next_key), std::move(iterator), now});
  std::set<uint64_t>& mine = by_owner_[owner];
  mine.insert(id);
  while (mine.size() > limits_.max_per_owner) {
    Erase(cursors_.find(*mine.begin()), &dropped);
  }
  while (!cursors_.empty() && (cursors_.size() > limits_.max_cursors ||
                               bytes_ > limits_.max_bytes)) {
    Erase(cursors_.begin(), &dropped);
  }
  return id;
}

bool CursorTable::Load(uint64_t owner, uint64_t cursor, std::string* next_key,
                       std::unique_ptr<Iterator>* iterator) {
  std::vector<std::unique_ptr<Iterator>> dropped;  // freed after unlocking
  MutexLock lock(&mu_);
  auto it = cursors_.find(cursor);
  if (it == cursors_.end() || it->second.owner != owner) return false;
  if (std::chrono::steady_clock::now() - it->second.saved > limits_.idle_ttl) {
    Erase(it, &dropped);
    return false;
  }
  *next_key = it->second.next_key;
  *iterator = std::move(it->second.iterator);  // null if none is parked
  parked_.erase(cursor);
  return true;
}

void CursorTable::Erase(Map::iterator it,
                        std::vector<std::unique_ptr<Iterator>>* out) {
  if (it->second.iterator != nullptr) {
    out->push_back(std::move(it->second.iterator));
  }
  parked_.erase(it->first);
  auto mine = by_owner_.find(it->second.owner);
  mine->second.erase(it->first);
  if (mine->second.empty()) by_owner_.erase(mine);
  bytes_ -= it->second.next_key.size() + kOverhead;
  cursors_.erase(it);
}

void CursorTable::ReleaseParked(std::chrono::steady_clock::time_point now,
                                size_t keep,
                                std::vector<std::unique_ptr<Iterator>>* out) {
  // Oldest first: those past the ttl, then any beyond `keep`.
  for (auto id = parked_.begin(); id != parked_.end();) {
    Cursor& c = cursors_.at(*id);
    if (now - c.saved <= limits_.parked_ttl && parked_.size() <= keep) break;
    out->push_back(std::move(c.iterator));
    id = parked_.erase(id);
  }
}

std::vector<std::unique_ptr<Iterator>> CursorTable::DropOwner(uint64_t owner) {
  std::vector<std::unique_ptr<Iterator>> dropped;  // handed out, unlocked
  MutexLock lock(&mu_);
  auto mine = by_owner_.find(owner);
  if (mine == by_owner_.end()) return dropped;
  const std::set<uint64_t> ids = mine->second;
  for (uint64_t id : ids) Erase(cursors_.find(id), &dropped);
  return dropped;
}

std::vector<std::unique_ptr<Iterator>> CursorTable::DropExpired() {
  std::vector<std::unique_ptr<Iterator>> dropped;  // handed out, unlocked
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  ReleaseParked(now, limits_.max_parked, &dropped);
  for (auto id = parked_.begin(); id != parked_.end();) {
    Cursor& c = cursors_.at(*id);
    if (!c.iterator->PinsOldVersion()) {
      ++id;
      continue;
    }
    dropped.push_back(std::move(c.iterator));
    id = parked_.erase(id);
  }
  while (!cursors_.empty() &&
         now - cursors_.begin()->second.saved > limits_.idle_ttl) {
    Erase(cursors_.begin(), &dropped);
  }
  return dropped;
}

size_t CursorTable::parked() {
  MutexLock lock(&mu_);
  return parked_.size();
}

size_t CursorTable::size() {
  MutexLock lock(&mu_);
  return cursors_.size();
}

size_t CursorTable::bytes() {
  MutexLock lock(&mu_);
  return bytes_;
}

void CursorTable::Clear() {
  Map drop;
  MutexLock lock(&mu_);
  drop.swap(cursors_);
  by_owner_.clear();
  parked_.clear();
  bytes_ = 0;
}

}  // namespace server
}  // namespace fencedkv
