// Copyright (c) fencedkv authors.

#include "server_state.h"

namespace fencedkv {
namespace server {

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
