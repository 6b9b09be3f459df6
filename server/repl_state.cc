// Copyright (c) fencedkv authors.

#include "repl_state.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "repl_stream.h"

namespace fencedkv {
namespace server {

namespace {

using json = nlohmann::json;

bool ParseU64(std::string_view text, uint64_t* v) {
  if (text.empty()) return false;
  auto r = std::from_chars(text.data(), text.data() + text.size(), *v);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

bool JsonU64(const json& j, const char* name, uint64_t* v) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_unsigned()) return false;
  *v = it->get<uint64_t>();
  return true;
}

// `n` random lowercase hex digits.
std::string RandomHex(int n) {
  std::random_device rd;
  std::string id;
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < n; ++i) id += kHex[rd() & 15];
  return id;
}

bool IsLowerHex(std::string_view text, size_t n) {
  return text.size() == n &&
         text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

void AppendEpoch(EpochList* list, uint64_t epoch, uint64_t start,
                 std::string id) {
  list->push_back(EpochStart{epoch, start, std::move(id)});
  if (list->size() > kMaxEpochs) {
    list->erase(list->begin(), list->begin() + (list->size() - kMaxEpochs));
  }
}

std::string FormatEpochs(const EpochList& list) {
  std::string out;
  for (const EpochStart& e : list) {
    if (!out.empty()) out += ',';
    out += std::to_string(e.epoch) + ":" + std::to_string(e.start);
    if (!e.id.empty()) out += ":" + e.id;
  }
  return out;
}

bool ParseEpochs(std::string_view text, EpochList* list) {
  list->clear();
  if (text.empty() || text == "-") return true;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(begin, end - begin);
    // epoch:start[:id]
    const size_t colon = item.find(':');
    const std::string_view rest = colon == std::string_view::npos
                                      ? std::string_view()
                                      : item.substr(colon + 1);
    const size_t id_colon = rest.find(':');
    const bool has_id = id_colon != std::string_view::npos;
    const std::string_view id = has_id ? rest.substr(id_colon + 1) : "";
    uint64_t epoch, start;
    if (colon == std::string_view::npos ||
        !ParseU64(item.substr(0, colon), &epoch) ||
        !ParseU64(rest.substr(0, id_colon), &start) ||
        (has_id && !IsPromotionId(id)) ||
        (!list->empty() && epoch <= list->back().epoch) ||
        list->size() >= kMaxEpochs) {
      list->clear();
      return false;
    }
    list->push_back(EpochStart{epoch, start, std::string(id)});
    begin = end + 1;
  }
  return true;
}

Status ReplState::Load(const std::string& dir, ReplState* state) {
  *state = ReplState();
  const std::string path = dir + "/" + kFileName;
  std::ifstream in(path);
  if (!in) {
    if (access(path.c_str(), F_OK) != 0) return Status::OK();  // none yet
    return Status::IOError("cannot read " + path);
  }
  std::string header;
  std::getline(in, header);
  if (header != "fencedkv-replication 1") {
    return Status::Corruption(path + " is not a replication state file");
  }
  bool have_max = false, have_log = false;
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    const std::string name = line.substr(0, space);
    const std::string value =
        space == std::string::npos ? "" : line.substr(space + 1);
    bool ok = true;
    if (name == "max_epoch") {
      ok = have_max = ParseU64(value, &state->max_epoch);
    } else if (name == "log_epoch") {
      ok = have_log = ParseU64(value, &state->log_epoch);
    } else if (name == "history") {
      state->history = value == "-" ? "" : value;
      ok = state->history.empty() || IsHistoryId(state->history);
    } else if (name == "epochs") {
      ok = ParseEpochs(value, &state->epochs);
    } else if (name == "follow") {
      std::string host;
      int port;
      state->follow = value == "-" ? "" : value;
      ok = state->follow.empty() || SplitHostPort(state->follow, &host, &port);
    } else if (name == "shard") {
      state->shard = value == "-" ? "" : value;
      ok = !value.empty();
    }  // unknown lines: from a later version; ignored
    if (!ok) {
      std::string what = path;
      what.append(": bad line '").append(line).append("'");
      return Status::Corruption(what);
    }
  }
  if (!have_max || !have_log || state->log_epoch > state->max_epoch) {
    return Status::Corruption(path + ": incomplete or inconsistent");
  }
  return Status::OK();
}

namespace {

// Replaces dir/name with `content` atomically and durably: a temporary
// file, fsync, rename, fsync of the directory.
Status ReplaceFileDurably(const std::string& dir, const char* name,
                          const std::string& content) {
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  // A fresh file of our own: whatever is at the temporary name (a leftover,
  // or a symlink planted there, whose target a plain open would write) goes
  // first, and the open follows no link and takes no existing file.
  if (unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return Status::IOError("cannot remove " + tmp, std::strerror(errno));
  }
  const int fd = open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError("cannot create " + tmp, std::strerror(errno));
  }
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;  // (no progress: not the unlink's ENOENT)
      break;
    }
    done += static_cast<size_t>(n);
  }
  const bool written = done == content.size() && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!written) {
    unlink(tmp.c_str());
    return Status::IOError("cannot write " + tmp, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_err = errno;
    unlink(tmp.c_str());
    return Status::IOError("cannot rename " + tmp + " to " + path,
                           std::strerror(rename_err));
  }
  return SyncPath(dir, /*directory=*/true);
}

}  // namespace

Status ReplState::Store(const std::string& dir) const {
  // Nothing Load would refuse: a state that does not parse back is not
  // written (the server could not start on it).
  EpochList check;
  if (!ParseEpochs(FormatEpochs(epochs), &check) || log_epoch > max_epoch ||
      shard == "-" || shard.find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument(
        "not storing an inconsistent replication state (epochs " +
        FormatEpochs(epochs) + ", max_epoch " + std::to_string(max_epoch) +
        ", log_epoch " + std::to_string(log_epoch) + ", shard '" +
        EscapeBytes(shard) + "')");
  }
  std::ostringstream out;
  out << "fencedkv-replication 1\n"
      << "history " << (history.empty() ? "-" : history) << "\n"
      << "max_epoch " << max_epoch << "\n"
      << "log_epoch " << log_epoch << "\n"
      << "epochs " << (epochs.empty() ? "-" : FormatEpochs(epochs)) << "\n"
      << "follow " << (follow.empty() ? "-" : follow) << "\n";
  // (Only when set: a state without a shard reads the same in every
  // version.)
  if (!shard.empty()) out << "shard " << shard << "\n";
  return ReplaceFileDurably(dir, kFileName, out.str());
}

std::string ShardRecord::ToJson() const {
  json e = json::array();
  // The record's epochs are etcd's, one number per promotion: no ids.
  for (const EpochStart& x : epochs) e.push_back({x.epoch, x.start});
  return json{{"epoch", epoch},      {"primary", primary}, {"isr", isr},
              {"epochs", e},         {"history", history}, {"lease", lease},
              {"nodes", json(nodes)}}
      .dump();
}

Status ShardRecord::Parse(std::string_view text, ShardRecord* record) {
  *record = ShardRecord();
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  if (!JsonU64(j, "epoch", &record->epoch) || record->epoch == 0) {
    return Status::InvalidArgument("no epoch");
  }
  // A takeover makes epoch + 1: the last number would wrap to 0.
  if (record->epoch == std::numeric_limits<uint64_t>::max()) {
    return Status::InvalidArgument("epoch " + std::to_string(record->epoch) +
                                   " is invalid (no epoch can follow it)");
  }
  auto primary = j.find("primary");
  if (primary == j.end() || !primary->is_string() ||
      primary->get_ref<const std::string&>().empty()) {
    return Status::InvalidArgument("no primary");
  }
  // One spelling per address ("::1:7379" as a record of an older build
  // wrote it is "[::1]:7379"): names are compared with this server's own.
  record->primary = NormalizeHostPort(primary->get<std::string>());
  auto isr = j.find("isr");
  if (isr == j.end() || !isr->is_array()) {
    return Status::InvalidArgument("no isr");
  }
  for (const json& m : *isr) {
    if (!m.is_string()) return Status::InvalidArgument("an isr member");
    record->isr.push_back(NormalizeHostPort(m.get<std::string>()));
  }
  auto history = j.find("history");
  if (history != j.end() && history->is_string()) {
    record->history = history->get<std::string>();
    // (Adopted by a takeover, printed in INFO, stored on its own line.)
    if (!record->history.empty() && !IsHistoryId(record->history)) {
      return Status::InvalidArgument("history");
    }
  }
  auto lease = j.find("lease");
  if (lease != j.end() && lease->is_number_integer()) {
    record->lease = lease->get<int64_t>();
  }
  auto epochs = j.find("epochs");
  if (epochs != j.end()) {
    if (!epochs->is_array()) return Status::InvalidArgument("epochs");
    for (const json& e : *epochs) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_number_unsigned() ||
          !e[1].is_number_unsigned() ||
          (!record->epochs.empty() &&
           e[0].get<uint64_t>() <= record->epochs.back().epoch)) {
        return Status::InvalidArgument("an epochs entry");
      }
      record->epochs.push_back(
          EpochStart{e[0].get<uint64_t>(), e[1].get<uint64_t>(), ""});
    }
  }
  auto nodes = j.find("nodes");
  if (nodes != j.end()) {
    if (!nodes->is_object()) return Status::InvalidArgument("nodes");
    for (const auto& [addr, node] : nodes->items()) {
      if (!node.is_string() || !IsNodeId(node.get_ref<const std::string&>())) {
        return Status::InvalidArgument("a nodes entry");
      }
      record->nodes[NormalizeHostPort(addr)] = node.get<std::string>();
    }
  }
  return Status::OK();
}

bool ShardRecord::NodeMatches(const std::string& addr,
                              std::string_view node) const {
  auto it = nodes.find(addr);
  return it == nodes.end() || it->second == node;
}

bool ShardRecord::InIsr(std::string_view addr) const {
  for (const auto& m : isr) {
    if (m == addr) return true;
  }
  return false;
}

std::string MemberRecord::ToJson() const {
  return json{{"epoch", epoch}, {"seq", seq}, {"role", role}, {"node", node}}
      .dump();
}

bool MemberRecord::Parse(std::string_view text, MemberRecord* member) {
  *member = MemberRecord();
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !JsonU64(j, "epoch", &member->epoch) ||
      !JsonU64(j, "seq", &member->seq)) {
    return false;
  }
  auto role = j.find("role");
  if (role != j.end() && role->is_string())
    member->role = role->get<std::string>();
  auto node = j.find("node");
  if (node != j.end() && node->is_string())
    member->node = node->get<std::string>();
  return true;
}

bool IsNodeId(std::string_view text) { return IsLowerHex(text, 32); }

Status ReadNodeId(const std::string& dir, std::string* id) {
  id->clear();
  const std::string path = dir + "/" + kNodeIdFile;
  if (access(path.c_str(), F_OK) != 0) return Status::OK();
  std::ifstream in(path);
  std::string text;
  if (!in) return Status::IOError("cannot read " + path);
  if (!std::getline(in, text)) {
    // (A directory opens and reads as nothing too.)
    return Status::Corruption(path +
                              " is empty or not a file, not a node id "
                              "(32 hex digits)");
  }
  if (!IsNodeId(text)) {
    return Status::Corruption(path + " is not a node id (32 hex digits)");
  }
  *id = text;
  return Status::OK();
}

Status StoreNodeId(const std::string& dir, const std::string& id) {
  if (!IsNodeId(id)) {
    return Status::InvalidArgument("not a node id (32 lowercase hex digits): " +
                                   id);
  }
  return ReplaceFileDurably(dir, kNodeIdFile, id + "\n");
}

Status LoadOrCreateNodeId(const std::string& dir, std::string* id) {
  // There: read it or fail (never replaced: that would make this server
  // another node).
  Status s = ReadNodeId(dir, id);
  if (!s.ok() || !id->empty()) return s;
  const std::string fresh = NewHistoryId();
  s = StoreNodeId(dir, fresh);
  if (s.ok()) *id = fresh;
  return s;
}

Status SyncPath(const std::string& path, bool directory) {
  const int fd =
      open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return Status::IOError("cannot open " + path);
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return Status::IOError("fsync " + path);
  return Status::OK();
}

std::string NewPromotionId() { return RandomHex(16); }

bool IsPromotionId(std::string_view text) { return IsLowerHex(text, 16); }

std::string PromotionIdOf(const EpochList& list, uint64_t epoch) {
  for (const EpochStart& e : list) {
    if (e.epoch == epoch) return e.id;
  }
  return "";
}

void ClearPromotionIds(EpochList* list) {
  for (EpochStart& e : *list) e.id.clear();
}

std::string NewHistoryId() { return RandomHex(32); }
bool IsHistoryId(std::string_view text) { return IsLowerHex(text, 32); }

SyncDecision DecideSync(const EpochList& epochs, uint64_t primary_latest_seq,
                        uint64_t replica_log_epoch, uint64_t replica_seq,
                        const std::string* replica_log_id) {
  SyncDecision d;
  auto full = [&d](std::string why) {
    d.full_sync = true;
    d.reason = std::move(why);
    return d;
  };
  if (replica_log_epoch == 0) return full("the replica never replicated");
  if (replica_seq > primary_latest_seq) {
    return full("the replica is ahead of the primary (sequence " +
                std::to_string(replica_seq) + " > " +
                std::to_string(primary_latest_seq) + ")");
  }
  for (size_t i = 0; i < epochs.size(); ++i) {
    if (epochs[i].epoch != replica_log_epoch) continue;
    if (replica_log_id != nullptr && *replica_log_id != epochs[i].id) {
      // Two servers promoted apart from one epoch took this number: what
      // the replica wrote in it is not this primary's, wherever it began.
      auto name = [](const std::string& id) {
        return id.empty() ? std::string("none") : id;
      };
      return full("the replica's epoch " + std::to_string(replica_log_epoch) +
                  " is another promotion (id " + name(*replica_log_id) +
                  ") than this primary's (id " + name(epochs[i].id) +
                  "): the two were made primaries apart");
    }
    if (i + 1 == epochs.size()) return d;  // the current epoch
    const uint64_t next_start = epochs[i + 1].start;
    if (replica_seq > next_start) {
      return full("the replica holds batches of epoch " +
                  std::to_string(replica_log_epoch) + " after sequence " +
                  std::to_string(next_start) + ", where epoch " +
                  std::to_string(epochs[i + 1].epoch) +
                  " began: never acknowledged, discarded");
    }
    return d;
  }
  return full("the replica's log epoch " + std::to_string(replica_log_epoch) +
              " is not among the primary's (" + FormatEpochs(epochs) + ")");
}

bool CopyWouldDiscard(const ReplState& mine, uint64_t replica_seq,
                      const std::string& history, const EpochList& epochs,
                      uint64_t primary_latest, std::string* why) {
  if (mine.history.empty()) return false;
  if (history != mine.history) {
    *why = "the primary's history " + history + " is not this replica's " +
           mine.history +
           " (was the primary restarted with another or an emptied --db?)";
    return true;
  }
  const std::string id = PromotionIdOf(mine.epochs, mine.log_epoch);
  const SyncDecision d =
      DecideSync(epochs, primary_latest, mine.log_epoch, replica_seq, &id);
  if (!d.full_sync) return false;
  *why =
      "the primary's log does not contain this replica's position "
      "(sequence " +
      std::to_string(replica_seq) + " of epoch " +
      std::to_string(mine.log_epoch) + "): " + d.reason;
  return true;
}

bool AdoptPrimaryState(const ReplState& mine, const std::string& history,
                       uint64_t epoch, const EpochList& epochs,
                       bool shard_epochs, ReplState* next, std::string* why) {
  // (Below kMaxEpoch: a promotion of this replica takes epoch + 1.)
  if (epoch == 0 || epoch >= kMaxEpoch) {
    *why = "epoch " + std::to_string(epoch) +
           " is not a primary's that a replica follows (1 to 2^64-3, so "
           "that its promotion's epoch + 1 is valid)";
    return false;
  }
  if (!IsHistoryId(history)) {
    *why =
        "the primary's history is not a history id (32 lowercase hex "
        "digits)";
    return false;
  }
  // Epochs compare within a history, and in etcd mode across histories.
  const bool comparable = shard_epochs || history == mine.history;
  if (comparable && epoch < mine.max_epoch) {
    *why = "this replica has seen epoch " + std::to_string(mine.max_epoch) +
           " (the primary was deposed)";
    return false;
  }
  *next = mine;
  next->history = history;
  next->max_epoch = comparable ? std::max(mine.max_epoch, epoch) : epoch;
  next->log_epoch = epoch;
  next->epochs = epochs;
  return true;
}

bool KeepSeenEpoch(const ReplState& current, uint64_t stream_epoch,
                   bool shard_epochs, ReplState* next, std::string* why) {
  if (!shard_epochs) return true;
  if (stream_epoch < current.max_epoch) {
    *why = "this replica has seen epoch " + std::to_string(current.max_epoch) +
           " since the handshake (the primary was deposed)";
    return false;
  }
  next->max_epoch = std::max(next->max_epoch, current.max_epoch);
  return true;
}

}  // namespace server
}  // namespace fencedkv
