// Copyright (c) fencedkv authors.

#include "server_state.h"

#include "command_table.h"

namespace fencedkv {
namespace server {

ServerState::ServerState()
    : command_stats(std::make_unique<CommandStats>(AllCommands().size())) {}

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
