// Copyright (c) fencedkv authors.
//
// replication: a server's replication state as kept in its data directory
// (NODE_ID and REPLICATION, docs/format.md), the store opened read-only;
// and, on a stopped server, --set_node_id: the one way to give a directory
// a member's node id back (docs/replication.md, Coordination).

#include <rocksdb/env.h>

#include "admin_tool.h"
#include "db/read_only_store.h"
#include "repl_state.h"

namespace fencedkv {
namespace admin {

namespace {

using server::ReplState;

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

class ReplicationCommand : public ReadCommand {
 public:
  const char* Name() const override { return "replication"; }
  bool Changes() const override {
    return !FLAGS_set_node_id.empty() || FLAGS_leave_shard;
  }
  void Help(std::string* out) const override {
    *out +=
        "  replication [--set_node_id=ID | --leave_shard]\n"
        "      the node id and replication state kept in DIR (NODE_ID, "
        "REPLICATION): history,\n"
        "      epochs, the primary followed, the etcd shard it is a member "
        "of. --leave_shard\n"
        "      (server stopped) takes it out of that shard: a member refuses "
        "to start without\n"
        "      its --shard, since it would take writes beside the shard's "
        "primary; only for a\n"
        "      server taken out of the shard for good (then start it with "
        "--replicaof=none or\n"
        "      --replicaof=HOST:PORT). --set_node_id (server stopped) "
        "puts ID in NODE_ID:\n"
        "      only for a member's own data moved without its NODE_ID, to "
        "match the shard\n"
        "      record's `nodes` entry (docs/replication.md); any other use "
        "lets a server stand\n"
        "      for a member whose writes it lacks\n";
  }
  std::vector<const char*> Flags() const override {
    return {"set_node_id", "leave_shard"};
  }

 protected:
  // (ReadCommand: no argument, and DIR a fencedkv store, opened read-only
  // without its lock.)
  ExecResult Read(const ReadOnlyStore& /*store*/,
                  const std::vector<std::string>& /*args*/,
                  FILE* out) override {
    std::string node;
    Status s = server::ReadNodeId(FLAGS_db, &node);
    // A damaged NODE_ID (the server refuses to start with it) may be
    // replaced: the old one is shown as unreadable.
    if (!FLAGS_set_node_id.empty() && FLAGS_leave_shard) {
      return ExecResult::Error(
          "--set_node_id and --leave_shard: one at a time");
    }
    if (!FLAGS_set_node_id.empty()) {
      return SetNodeId(s.ok() ? node : "(unreadable: " + s.ToString() + ")",
                       out);
    }
    if (FLAGS_leave_shard) return LeaveShard(out);
    ReplState state;
    if (s.ok()) s = ReplState::Load(FLAGS_db, &state);
    if (!s.ok()) return ExecResult::FromStatus(s);
    Print(out, "node_id " + OrDash(node) + "\n");
    Print(out, "history " + OrDash(state.history) + "\n");
    Print(out, "max_epoch " + std::to_string(state.max_epoch) + "\n");
    Print(out, "log_epoch " + std::to_string(state.log_epoch) + "\n");
    Print(out, "epochs " + OrDash(server::FormatEpochs(state.epochs)) + "\n");
    Print(out, "follow " + OrDash(state.follow) + "\n");
    Print(out, "shard " + OrDash(state.shard) + "\n");
    return ExecResult::Ok();
  }

 private:
  // Holds the directory's RocksDB LOCK while NODE_ID is replaced, so no
  // server starts on it meanwhile.
  static ExecResult SetNodeId(const std::string& before, FILE* out) {
    if (!server::IsNodeId(FLAGS_set_node_id)) {
      return ExecResult::Error(
          "--set_node_id: not a node id (32 lowercase hex digits): " +
          EscapeBytes(FLAGS_set_node_id));
    }
    rocksdb::FileLock* lock = nullptr;
    Status s = LockStore(FLAGS_db, "stop the server first", &lock);
    if (!s.ok()) return ExecResult::FromStatus(s);
    s = server::StoreNodeId(FLAGS_db, FLAGS_set_node_id);
    rocksdb::Env::Default()->UnlockFile(lock);
    if (!s.ok()) return ExecResult::FromStatus(s);
    Print(out, "node_id " + OrDash(before) + " -> " + FLAGS_set_node_id + "\n");
    return ExecResult::Ok();
  }

  // Clears REPLICATION's shard under the directory's LOCK; the rest of the
  // state stays.
  static ExecResult LeaveShard(FILE* out) {
    rocksdb::FileLock* lock = nullptr;
    Status s = LockStore(FLAGS_db, "stop the server first", &lock);
    if (!s.ok()) return ExecResult::FromStatus(s);
    ReplState state;
    s = ReplState::Load(FLAGS_db, &state);
    const std::string before = state.shard;
    if (s.ok() && !before.empty()) {
      state.shard.clear();
      s = state.Store(FLAGS_db);
    }
    rocksdb::Env::Default()->UnlockFile(lock);
    if (!s.ok()) return ExecResult::FromStatus(s);
    Print(out, before.empty() ? std::string("shard - (not a member of one)\n")
                              : "shard " + before + " -> -\n");
    return ExecResult::Ok();
  }
};

}  // namespace

void AppendReplicationCommand(std::vector<CommandFactory>* table) {
  table->push_back(&MakeCommand<ReplicationCommand>);
}

}  // namespace admin
}  // namespace fencedkv
