// Copyright (c) fencedkv authors.

#include "acl.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "command_table.h"

namespace fencedkv {
namespace server {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Constant-time comparison of two equal-length strings.
bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

// The categories of command `c` in its ordinary (form 0) or administrative
// (form 1) form.
uint32_t FormCategories(const CommandSpec& c, int form) {
  return form == 1 && c.admin_form != nullptr
             ? c.admin_categories | kCatAdmin | kCatDangerous
             : c.categories;
}

}  // namespace

const std::vector<std::string>& AclCategoryNames() {
  static const std::vector<std::string> kNames = {
      "read",  "write",     "keyspace",   "fencing",    "lease",
      "admin", "dangerous", "connection", "transaction"};
  return kNames;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

bool AclUser::CheckPassword(std::string_view password) const {
  if (nopass_) return true;
  const std::string hash = Sha256Hex(password);
  bool ok = false;
  for (const auto& h : hashes_) ok |= SecretEquals(h, hash);  // no early exit
  return ok;
}

std::string AclUser::Describe() const {
  std::string out = "user " + name_ + (enabled_ ? " on" : " off");
  if (nopass_) out += " nopass";
  for (const auto& h : hashes_) out += " #" + h;
  out += allkeys_ ? " ~*" : " resetkeys";
  if (allchannels_) out += " &*";
  if (command_rules_.empty()) out += " -@all";
  for (const auto& r : command_rules_) out += " " + r;
  return out;
}

bool Acl::ApplyRule(std::string_view rule, AclUser* u, std::string* error) {
  const auto& commands = AllCommands();
  bool* enabled = &u->enabled_;
  bool* nopass = &u->nopass_;
  bool* allkeys = &u->allkeys_;
  bool* allchannels = &u->allchannels_;
  std::vector<std::string>* hashes = &u->hashes_;
  std::vector<std::string>* command_rules = &u->command_rules_;
  std::vector<uint8_t>* allowed = &u->allowed_;
  const std::string lower = Lower(rule);
  auto set_units = [&](bool allow, auto&& selects) {
    for (size_t i = 0; i < commands.size(); ++i) {
      for (int form = 0; form < 2; ++form) {
        if (selects(commands[i], form)) (*allowed)[i * 2 + form] = allow;
      }
    }
  };
  if (lower == "on" || lower == "off") {
    *enabled = lower == "on";
  } else if (lower == "nopass") {
    *nopass = true;
    hashes->clear();
  } else if (lower == "resetpass") {
    *nopass = false;
    hashes->clear();
  } else if (rule[0] == '>' || rule[0] == '<') {
    if (rule.size() - 1 > Acl::kMaxPasswordBytes) {
      *error = "a password of more than " +
               std::to_string(Acl::kMaxPasswordBytes) +
               " bytes (AUTH before authentication cannot carry it)";
      return false;
    }
    const std::string h = Sha256Hex(rule.substr(1));
    hashes->erase(std::remove(hashes->begin(), hashes->end(), h),
                  hashes->end());
    if (rule[0] == '>') {
      hashes->push_back(h);
      *nopass = false;
    }
  } else if (rule[0] == '#' || rule[0] == '!') {
    const std::string h = Lower(rule.substr(1));
    if (!IsSha256Hex(h)) {
      *error = "'" + std::string(rule.substr(0, 1)) +
               "' must be followed by a SHA-256 hash (64 hex digits)";
      return false;
    }
    hashes->erase(std::remove(hashes->begin(), hashes->end(), h),
                  hashes->end());
    if (rule[0] == '#') {
      hashes->push_back(h);
      *nopass = false;
    }
  } else if (lower == "~*" || lower == "allkeys" || lower == "%rw~*") {
    *allkeys = true;
  } else if (lower == "resetkeys") {
    *allkeys = false;
  } else if (rule[0] == '~' || rule[0] == '%') {
    *error = "key pattern '" + std::string(rule) +
             "' is not supported: fencedkv grants every key (~*) or none";
    return false;
  } else if (lower == "&*" || lower == "allchannels") {
    *allchannels = true;
  } else if (lower == "resetchannels") {
    *allchannels = false;
  } else if (rule[0] == '&') {
    // Channel patterns: fencedkv has no pub/sub; accepted for Redis files.
  } else if (lower == "allcommands" || lower == "nocommands" ||
             rule[0] == '+' || rule[0] == '-') {
    bool allow;
    std::string what;
    if (lower == "allcommands" || lower == "nocommands") {
      allow = lower == "allcommands";
      what = "@all";
    } else {
      allow = rule[0] == '+';
      what = lower.substr(1);
    }
    if (what == "@all") {
      set_units(allow, [](const CommandSpec&, int) { return true; });
      command_rules->clear();  // everything before is overridden
    } else if (!what.empty() && what[0] == '@') {
      const auto& names = AclCategoryNames();
      auto it = std::find(names.begin(), names.end(), what.substr(1));
      if (it == names.end()) {
        *error = "unknown ACL category '" + what + "'";
        return false;
      }
      const uint32_t cat = 1u << (it - names.begin());
      set_units(allow, [cat](const CommandSpec& c, int form) {
        return (FormCategories(c, form) & cat) != 0;
      });
    } else {
      if (what.find('|') != std::string::npos) {
        *error = "subcommand rules ('" + std::string(rule) +
                 "') are not supported: use the command or a category";
        return false;
      }
      const CommandSpec* c = LookupCommand(what);
      if (c == nullptr) {
        *error = "unknown command '" + what + "' in ACL rule";
        return false;
      }
      set_units(allow, [c](const CommandSpec& s, int) { return &s == c; });
    }
    command_rules->push_back(std::string(allow ? "+" : "-") + what);
  } else if (lower == "reset") {
    *enabled = false;
    *nopass = false;
    *allkeys = false;
    *allchannels = false;
    hashes->clear();
    command_rules->clear();
    std::fill(allowed->begin(), allowed->end(), 0);
  } else {
    *error = "unknown ACL rule '" + EscapeBytesBounded(rule) + "'";
    return false;
  }
  return true;
}

Status Acl::AddUser(std::string_view line, std::string* error) {
  std::istringstream words{std::string(line)};
  std::string word, name;
  words >> word >> name;
  if (word != "user" || name.empty()) {
    *error = "expected 'user <name> <rules...>'";
    return Status::InvalidArgument(*error);
  }
  if (users_.count(name) != 0) {
    *error = "user '" + name + "' is defined twice";
    return Status::InvalidArgument(*error);
  }
  AclUser u;
  u.name_ = name;
  u.allowed_.assign(AllCommands().size() * 2, 0);
  while (words >> word) {
    if (!ApplyRule(word, &u, error)) {
      return Status::InvalidArgument(*error);
    }
  }
  users_.emplace(name, std::move(u));
  return Status::OK();
}

Status Acl::Parse(std::string_view text, std::string_view source,
                  const std::string& requirepass,
                  std::shared_ptr<const Acl>* acl) {
  if (requirepass.size() > kMaxPasswordBytes) {
    return Status::InvalidArgument(
        "the password (--requirepass, --requirepass_file or "
        "FENCEDKV_REQUIREPASS) has more than " +
        std::to_string(kMaxPasswordBytes) +
        " bytes: AUTH before authentication cannot carry it");
  }
  auto result = std::make_shared<Acl>();
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    while (!line.empty() &&
           std::isspace(static_cast<unsigned char>(line.back()))) {
      line.remove_suffix(1);
    }
    while (!line.empty() &&
           std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    if (line.empty() || line[0] == '#') continue;
    std::string error;
    if (!result->AddUser(line, &error).ok()) {
      return Status::InvalidArgument(std::string(source) + ":" +
                                     std::to_string(line_no) + ": " + error);
    }
  }
  if (result->users_.count("default") != 0) {
    if (!requirepass.empty()) {
      return Status::InvalidArgument(
          std::string(source) +
          " defines the 'default' user and --requirepass is set: set its "
          "password in the file (user default on >password ...)");
    }
  } else {
    std::string error;
    // The password may hold spaces: it is added after the line is split.
    Status s =
        result->AddUser("user default on nopass ~* &* +@all -@admin", &error);
    if (!s.ok()) return s;
    if (!requirepass.empty()) {
      AclUser& d = result->users_.at("default");
      d.nopass_ = false;
      d.hashes_.push_back(Sha256Hex(requirepass));
    }
  }
  *acl = std::move(result);
  return Status::OK();
}

Status ReadConfigFile(const std::string& path, const std::string& what,
                      std::string* text) {
  // A directory opens as a stream and reads as empty: an --aclfile naming
  // one started the server with no authentication at all. A pipe or a
  // device is read (--requirepass_file=<(cmd), /dev/stdin); opened without
  // blocking, so a FIFO with no writer reads as empty instead of hanging.
  std::string cannot = "cannot read ";
  cannot.append(what).append(" ").append(path);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::IOError(cannot, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    close(fd);
    return Status::IOError(cannot, "a directory, not a file");
  }
  // Blocking reads from here on (a pipe's writer may not have written yet).
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  text->clear();
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      close(fd);
      return Status::IOError(cannot, err);
    }
    text->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return Status::OK();
}

Status Acl::LoadFile(const std::string& path, const std::string& requirepass,
                     std::shared_ptr<const Acl>* acl) {
  std::string text;
  Status s = ReadConfigFile(path, "the ACL file", &text);
  if (!s.ok()) return s;
  return Parse(text, path, requirepass, acl);
}

const AclUser* Acl::InitialUser() const {
  auto it = users_.find("default");
  if (it == users_.end() || !it->second.enabled_ || !it->second.nopass_) {
    return nullptr;
  }
  return &it->second;
}

std::string ShownUserName(const AclUser* user) {
  return user != nullptr ? user->name() : std::string("default");
}

bool Acl::DefaultIsNopass() const { return InitialUser() != nullptr; }

const AclUser* Acl::Authenticate(std::string_view user,
                                 std::string_view password) const {
  // No password is longer (Parse refuses one), and hashing 60 MiB held
  // the loop 90 ms.
  if (password.size() > kMaxPasswordBytes) return nullptr;
  auto it = users_.find(user);
  if (it == users_.end()) {
    Sha256Hex(password);  // about the same time as a known user
    return nullptr;
  }
  const AclUser& u = it->second;
  if (!u.CheckPassword(password) || !u.enabled_) return nullptr;
  return &u;
}

}  // namespace server
}  // namespace fencedkv
