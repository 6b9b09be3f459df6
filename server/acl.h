// Copyright (c) fencedkv authors.
//
// Users and what they may run, in Redis's ACL syntax (a subset). An ACL file
// (--aclfile) holds one user per line, '#' comments and blank lines:
//
//   user admin on >s3cret ~* &* +@all
//   user app on #<sha256 hex of the password> ~* +@all -@admin
//   user locker on >pw +@lease +ping
//
// Rules, applied left to right, on a user that starts "off", with no
// password, no keys and no commands:
//   on | off                      the user may (not) authenticate
//   >pass | <pass                 add / remove a password
//   #sha256hex | !sha256hex       add / remove a password by its SHA-256
//   nopass | resetpass            any password works / no password works
//   ~* | allkeys | resetkeys      every key / no key (other key patterns are
//                                 refused: fencedkv has no per-key ACLs)
//   &* | allchannels | resetchannels   accepted for Redis files; no pub/sub
//   +@cat | -@cat                 allow / deny a category (@all: everything)
//   +cmd | -cmd                   allow / deny a command
//   allcommands | nocommands      +@all / -@all
//   reset                         back to the initial state
//
// A command is in categories (the command table: @read @write @keyspace
// @fencing @lease @admin @dangerous @connection @transaction). Some calls of
// a command are its administrative form, in categories of its own that
// include @admin and @dangerous: FENCE.FLOOR with an argument (raising the
// floor: @write @fencing), CLIENT LIST (@connection), ACL LIST / USERS.
// "-@admin" denies those forms and keeps the ordinary ones; +cmd / -cmd
// cover both.
//
// The 'default' user is the one a connection starts as (and AUTH <password>
// names). Unless the file defines it, it is
//   user default on nopass ~* &* +@all -@admin        (no --requirepass)
//   user default on >requirepass ~* &* +@all -@admin  (--requirepass)
// so ordinary clients can run every command but the operator's: an operator
// is a user with @admin from --aclfile. A connection is authenticated at
// once if 'default' is on and nopass; otherwise it must AUTH first.
//
// Passwords are kept as SHA-256 hashes only; ACL LIST shows the hashes.
//
// Thread safety: an Acl is immutable once built; share it freely.

#ifndef FENCEDKV_SERVER_ACL_H_
#define FENCEDKV_SERVER_ACL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fencedkv/status.h"

namespace fencedkv {
namespace server {

struct CommandSpec;

// ACL categories (CommandSpec::categories).
enum AclCategory : uint32_t {
  kCatRead = 1 << 0,
  kCatWrite = 1 << 1,
  kCatKeyspace = 1 << 2,
  kCatFencing = 1 << 3,
  kCatLease = 1 << 4,
  kCatAdmin = 1 << 5,
  kCatDangerous = 1 << 6,
  kCatConnection = 1 << 7,
  kCatTransaction = 1 << 8,
};
// "read", "write", ... in bit order; the index of a name is its bit.
const std::vector<std::string>& AclCategoryNames();

class AclUser {
 public:
  const std::string& name() const { return name_; }
  bool enabled() const { return enabled_; }
  bool allkeys() const { return allkeys_; }
  // True if `password` is one of the user's (always, with nopass).
  bool CheckPassword(std::string_view password) const;
  // True if the user may run the command with index `index` in
  // AllCommands(), in its ordinary or its administrative form.
  bool Allows(size_t index, bool admin_form) const {
    return allowed_[index * 2 + (admin_form ? 1 : 0)] != 0;
  }
  // The user as an ACL LIST line ("user app on #... ~* +@all -@admin").
  std::string Describe() const;

 private:
  friend class Acl;
  std::string name_;
  bool enabled_ = false;
  bool nopass_ = false;
  bool allkeys_ = false;
  bool allchannels_ = false;
  std::vector<std::string> hashes_;         // SHA-256, lower-case hex
  std::vector<std::string> command_rules_;  // as given, for Describe
  std::vector<uint8_t> allowed_;            // 2 per command (see Allows)
};

class Acl {
 public:
  // The users of `text` (an ACL file's contents; `source` names it in
  // errors: "users.acl:3: unknown ACL category '@x'"), plus the built-in
  // 'default' user with `requirepass` unless the text defines 'default'
  // (then a non-empty `requirepass` is InvalidArgument: which would hold?).
  static Status Parse(std::string_view text, std::string_view source,
                      const std::string& requirepass,
                      std::shared_ptr<const Acl>* acl);
  // Parse of a file's contents; IOError if it cannot be read.
  static Status LoadFile(const std::string& path,
                         const std::string& requirepass,
                         std::shared_ptr<const Acl>* acl);

  // The user a new connection starts as: 'default' if it is on and nopass;
  // null if the connection must AUTH first.
  const AclUser* InitialUser() const;
  // The longest password (a rule '>p' or '<p', --requirepass): before
  // authentication a bulk is at most 16 KiB (resp_parser.h), so a longer one
  // could never log a connection in; AUTH with a longer one fails at once.
  static constexpr size_t kMaxPasswordBytes = 16 << 10;
  // The user if it exists, is on and `password` is one of its; else null.
  const AclUser* Authenticate(std::string_view user,
                              std::string_view password) const;
  // True if 'default' is on and nopass (AUTH <password> is then an error,
  // as in Redis).
  bool DefaultIsNopass() const;
  // Every user, by name.
  const std::map<std::string, AclUser, std::less<>>& users() const {
    return users_;
  }

 private:
  // Adds the user of one "user <name> <rules...>" line.
  Status AddUser(std::string_view line, std::string* error);
  // Applies one rule to `u`; false with *error set if it is not one.
  static bool ApplyRule(std::string_view rule, AclUser* u, std::string* error);
  std::map<std::string, AclUser, std::less<>> users_;
};

// The name CLIENT LIST and CLIENT INFO show for a connection's user, and
// CLIENT KILL USER matches: a connection that must still AUTH has no user
// and shows 'default', as in Redis (it would authenticate as it).
std::string ShownUserName(const AclUser* user);

// SHA-256 of `data`, lower-case hex.
std::string Sha256Hex(std::string_view data);

// The whole of a configuration file (an ACL file, --requirepass_file):
// IOError naming `what` and `path` if it cannot be opened or read, or is not
// a regular file (a directory read as empty).
Status ReadConfigFile(const std::string& path, const std::string& what,
                      std::string* text);

}  // namespace server
}  // namespace fencedkv

#endif  // FENCEDKV_SERVER_ACL_H_
