// Copyright (c) fencedkv authors.
//
// A WriteBatch holds puts and deletes, each with its own token, possibly in
// several fence domains. DB::Write applies a batch all or nothing: the
// operations are checked in order, as if applied one after the other (so a
// later op on a domain is checked against the max raised by an earlier op in
// the same batch); if any is stale nothing is written and the error names the
// first stale op.
//
// Intentionally copyable. Not thread-safe: a batch must not be modified
// concurrently, but may be read (written to a DB) by several threads.

#ifndef FENCEDKV_INCLUDE_FENCEDKV_WRITE_BATCH_H_
#define FENCEDKV_INCLUDE_FENCEDKV_WRITE_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/token.h"

namespace fencedkv {

// A precondition on a put, evaluated after the fence checks, in batch order
// (Redis SET NX / XX). If one fails, DB::Write writes nothing and says which.
enum class WriteCondition : uint8_t {
  kNone = 0,
  kIfAbsent = 1,   // the key has no value (SET NX)
  kIfPresent = 2,  // the key has a value (SET XX)
};

class WriteBatch {
 public:
  enum class OpType : uint8_t { kPut = 0, kDelete = 1 };

  // A view of one operation; valid until the batch is modified or destroyed.
  struct Op {
    OpType type;
    std::string_view key;
    std::string_view value;  // empty for kDelete
    Token token;
    WriteCondition condition;
  };

  WriteBatch() = default;

  // Appends a put / delete. Arguments are validated by DB::Write.
  void Put(std::string_view key, std::string_view value, Token token,
           WriteCondition condition = WriteCondition::kNone);
  void Delete(std::string_view key, Token token);

  // True if some put carries a condition.
  bool HasConditions() const { return has_conditions_; }

  // Number of operations.
  size_t Count() const { return ops_.size(); }
  // The i-th operation, 0 <= i < Count().
  Op Get(size_t i) const;
  // Bytes of keys and values held.
  size_t ApproximateSize() const { return rep_.size(); }

  void Clear();

 private:
  struct OpRef {
    OpType type;
    size_t key_len;
    size_t value_len;
    size_t offset;  // key bytes then value bytes in rep_
    Token token;
    WriteCondition condition;
  };
  std::string rep_;
  std::vector<OpRef> ops_;
  bool has_conditions_ = false;
};

}  // namespace fencedkv

#endif  // FENCEDKV_INCLUDE_FENCEDKV_WRITE_BATCH_H_
