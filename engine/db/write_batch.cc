// Copyright (c) fencedkv authors.

#include "fencedkv/write_batch.h"

#include <cassert>

namespace fencedkv {

void WriteBatch::Put(std::string_view key, std::string_view value, Token token,
                     WriteCondition condition) {
  ops_.push_back(OpRef{OpType::kPut, key.size(), value.size(), rep_.size(),
                       token, condition});
  if (condition != WriteCondition::kNone) has_conditions_ = true;
  rep_.append(key);
  rep_.append(value);
}

void WriteBatch::Delete(std::string_view key, Token token) {
  ops_.push_back(OpRef{OpType::kDelete, key.size(), 0, rep_.size(), token,
                       WriteCondition::kNone});
  rep_.append(key);
}

WriteBatch::Op WriteBatch::Get(size_t i) const {
  assert(i < ops_.size());
  const OpRef& r = ops_[i];
  const char* base = rep_.data() + r.offset;
  return Op{r.type, std::string_view(base, r.key_len),
            std::string_view(base + r.key_len, r.value_len), r.token,
            r.condition};
}

void WriteBatch::Clear() {
  rep_.clear();
  ops_.clear();
  has_conditions_ = false;
}

}  // namespace fencedkv
