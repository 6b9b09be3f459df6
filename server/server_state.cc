// Copyright (c) fencedkv authors.

#include "server_state.h"

#include <algorithm>
#include <chrono>

#include "command_table.h"

namespace fencedkv {
namespace server {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t ShownMulti(const ClientState& client) {
  return client.in_multi ? static_cast<int64_t>(client.queued.size()) : -1;
}

std::string ClientListLine(uint64_t id, const std::string& addr,
                           const std::string& name, int64_t age_s,
                           int64_t idle_s, int64_t multi, const AclUser* user) {
  return "id=" + std::to_string(id) + " addr=" + addr + " name=" + name +
         " age=" + std::to_string(age_s) + " idle=" + std::to_string(idle_s) +
         " db=0 multi=" + std::to_string(multi) +
         " user=" + ShownUserName(user) + "\n";
}

ServerState::ServerState()
    : command_stats(std::make_unique<CommandStats>(AllCommands().size())) {}

bool ServerState::ClientMemoryAllows(size_t more) const {
  const size_t cap = options != nullptr ? options->maxmemory_clients : 0;
  if (cap == 0 || stats == nullptr) return true;
  const int64_t held = stats->client_bytes.load(std::memory_order_relaxed);
  return static_cast<size_t>(std::max<int64_t>(0, held)) + more <= cap;
}

std::string ServerState::ClientMemoryRefusal(const char* outcome) {
  if (stats != nullptr) {
    stats->client_memory_refusals.fetch_add(1, std::memory_order_relaxed);
  }
  const size_t cap = options != nullptr ? options->maxmemory_clients : 0;
  return "ERR client memory limit reached (maxmemory_clients " +
         std::to_string(cap) +
         " bytes for all clients' requests, MULTI queues and replies): " +
         outcome;
}

bool ServerState::MakeClientRoom(uint64_t self, int64_t self_after,
                                 size_t more) {
  // As Redis: the largest clients go until the others fit; once the asker
  // would be the largest, it is the one refused. (Each eviction writes its
  // client's share off at once, so this ends.)
  for (int i = 0; i < 64; ++i) {
    if (ClientMemoryAllows(more)) return true;
    if (!evict_client || !evict_client(self, self_after)) return false;
  }
  return ClientMemoryAllows(more);
}

void ServerState::DisposeIterators(
    std::vector<std::unique_ptr<Iterator>> iterators) {
  if (iterators.empty()) return;
  auto held = std::make_shared<std::vector<std::unique_ptr<Iterator>>>(
      std::move(iterators));
  if (!scans.Submit([held] { held->clear(); })) held->clear();
}

const Acl& ServerState::acl() {
  std::call_once(acl_once_, [this] {
    acl_ = options->acl;
    if (acl_ == nullptr) {
      Status s = Acl::Parse("", "", options->requirepass, &acl_);
      (void)s;  // cannot fail: no text
    }
  });
  return *acl_;
}

}  // namespace server
}  // namespace fencedkv
