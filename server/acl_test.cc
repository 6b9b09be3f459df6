// Copyright (c) fencedkv authors.
//
// The ACL file grammar and its rules, without a server.

#include "acl.h"

#include <gtest/gtest.h>

#include "command_table.h"

namespace fencedkv {
namespace server {
namespace {

std::shared_ptr<const Acl> Parse(const std::string& text,
                                 const std::string& requirepass = "") {
  std::shared_ptr<const Acl> acl;
  Status s = Acl::Parse(text, "users.acl", requirepass, &acl);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return acl;
}

std::string ParseError(const std::string& text,
                       const std::string& requirepass = "") {
  std::shared_ptr<const Acl> acl;
  return Acl::Parse(text, "users.acl", requirepass, &acl).ToString();
}

size_t Index(const char* name) {
  return static_cast<size_t>(LookupCommand(name) - AllCommands().data());
}

TEST(AclTest, Sha256) {
  EXPECT_EQ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            Sha256Hex("abc"));
}

TEST(AclTest, TheBuiltInDefaultUser) {
  auto open = Parse("");
  const AclUser* d = open->InitialUser();
  ASSERT_NE(nullptr, d);  // no password: authenticated at once
  EXPECT_EQ("user default on nopass ~* &* +@all -@admin", d->Describe());
  EXPECT_TRUE(d->Allows(Index("set"), false));
  EXPECT_TRUE(d->Allows(Index("fence.floor"), false));
  EXPECT_FALSE(d->Allows(Index("fence.floor"), true));
  EXPECT_FALSE(d->Allows(Index("config"), false));
  EXPECT_TRUE(open->DefaultIsNopass());

  auto locked = Parse("", "pw");
  EXPECT_EQ(nullptr, locked->InitialUser());  // must AUTH
  EXPECT_FALSE(locked->DefaultIsNopass());
  EXPECT_EQ(nullptr, locked->Authenticate("default", "nope"));
  ASSERT_NE(nullptr, locked->Authenticate("default", "pw"));
  EXPECT_EQ("user default on #" + Sha256Hex("pw") + " ~* &* +@all -@admin",
            locked->Authenticate("default", "pw")->Describe());
  // A password with spaces is one password.
  EXPECT_NE(nullptr, Parse("", "a b")->Authenticate("default", "a b"));
}

TEST(AclTest, RulesApplyLeftToRight) {
  auto acl = Parse(
      "# comment\n"
      "\n"
      "  user a on >one >two <one ~* +@all -@admin +config -get  \n"
      "user b on #" +
      Sha256Hex("hashed") +
      " nocommands +@lease\n"
      "user c on >x ~* allcommands reset on nopass +ping\n"
      "user d off >pw ~* +@all\n"
      "user e on >pw ~* resetkeys +@fencing -fence.advance\n");
  const AclUser* a = acl->Authenticate("a", "two");
  ASSERT_NE(nullptr, a);
  EXPECT_EQ(nullptr, acl->Authenticate("a", "one"));  // removed
  EXPECT_TRUE(a->Allows(Index("config"), false));
  EXPECT_FALSE(a->Allows(Index("get"), false));
  EXPECT_FALSE(a->Allows(Index("client"), true));  // CLIENT LIST: @admin
  EXPECT_TRUE(a->Allows(Index("client"), false));
  EXPECT_EQ("user a on #" + Sha256Hex("two") + " ~* +@all -@admin +config -get",
            a->Describe());

  const AclUser* b = acl->Authenticate("b", "hashed");
  ASSERT_NE(nullptr, b);
  EXPECT_TRUE(b->Allows(Index("lease.acquire"), false));
  EXPECT_FALSE(b->Allows(Index("get"), false));
  EXPECT_FALSE(b->allkeys());

  const AclUser* c = acl->Authenticate("c", "anything");  // nopass
  ASSERT_NE(nullptr, c);
  EXPECT_FALSE(c->allkeys());  // reset dropped ~*
  EXPECT_TRUE(c->Allows(Index("ping"), false));
  EXPECT_FALSE(c->Allows(Index("get"), false));

  EXPECT_EQ(nullptr, acl->Authenticate("d", "pw"));  // off
  EXPECT_EQ(nullptr, acl->Authenticate("nobody", "pw"));

  const AclUser* e = acl->Authenticate("e", "pw");
  ASSERT_NE(nullptr, e);
  EXPECT_TRUE(e->Allows(Index("fence.get"), false));
  EXPECT_FALSE(e->Allows(Index("fence.advance"), false));
  // +@fencing includes FENCE.FLOOR's administrative form (@write @fencing
  // @admin): categories are sets, as in Redis.
  EXPECT_TRUE(e->Allows(Index("fence.floor"), true));
  // The built-in default user is still there.
  EXPECT_NE(nullptr, acl->InitialUser());
}

TEST(AclTest, ReadDoesNotIncludeRaisingTheFloor) {
  auto acl = Parse("user r on >pw ~* +@read\n");
  const AclUser* r = acl->Authenticate("r", "pw");
  ASSERT_NE(nullptr, r);
  EXPECT_TRUE(r->Allows(Index("fence.floor"), false));
  EXPECT_FALSE(r->Allows(Index("fence.floor"), true));
}

TEST(AclTest, Refusals) {
  EXPECT_EQ("Invalid argument: users.acl:2: unknown ACL category '@nosuch'",
            ParseError("user a on\nuser b on +@nosuch\n"));
  EXPECT_EQ("Invalid argument: users.acl:1: unknown command 'frob' in ACL rule",
            ParseError("user a on +frob"));
  EXPECT_EQ("Invalid argument: users.acl:1: unknown ACL rule 'sideways'",
            ParseError("user a sideways"));
  // Control bytes are escaped, not echoed raw into logs and terminals.
  EXPECT_EQ("Invalid argument: users.acl:1: unknown ACL rule '\\x01\\x1b'",
            ParseError(std::string("user a \x01\x1b")));
  EXPECT_EQ(
      "Invalid argument: users.acl:1: key pattern '~user:*' is not "
      "supported: fencedkv grants every key (~*) or none",
      ParseError("user a on ~user:*"));
  EXPECT_EQ(
      "Invalid argument: users.acl:1: subcommand rules ('+client|list') "
      "are not supported: use the command or a category",
      ParseError("user a on +client|list"));
  EXPECT_EQ(
      "Invalid argument: users.acl:1: '#' must be followed by a SHA-256 "
      "hash (64 hex digits)",
      ParseError("user a on #abc"));
  EXPECT_EQ("Invalid argument: users.acl:2: user 'a' is defined twice",
            ParseError("user a on\nuser a off\n"));
  EXPECT_EQ("Invalid argument: users.acl:1: expected 'user <name> <rules...>'",
            ParseError("usr a on"));
  EXPECT_EQ(
      "Invalid argument: users.acl defines the 'default' user and "
      "--requirepass is set: set its password in the file (user default "
      "on >password ...)",
      ParseError("user default on nopass +@all", "pw"));
}

TEST(AclTest, TheFileMayRedefineDefault) {
  auto acl = Parse("user default on nopass ~* +@all\n");
  const AclUser* d = acl->InitialUser();
  ASSERT_NE(nullptr, d);
  EXPECT_TRUE(d->Allows(Index("fence.floor"), true));  // everyone an operator
  EXPECT_EQ(nullptr, Parse("user default off\n")->InitialUser());
}

}  // namespace
// AUTH with a password longer than any user's can have fails at once,
// without hashing it (a 60 MiB AUTH hashed on the loop for 90 ms); a rule
// with such a password is refused.
TEST(AclTest, PasswordsAreBoundedAsAuthBeforeLoginIs) {
  const std::string longest(Acl::kMaxPasswordBytes, 'p');
  std::shared_ptr<const Acl> acl;
  ASSERT_TRUE(
      Acl::Parse("user u on >" + longest + " ~* +@all", "acl", "", &acl).ok());
  EXPECT_NE(nullptr, acl->Authenticate("u", longest));
  EXPECT_EQ(nullptr, acl->Authenticate("u", longest + "p"));
  const Status s =
      Acl::Parse("user u on >" + longest + "p ~* +@all", "acl", "", &acl);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.ToString().find("more than 16384 bytes"))
      << s.ToString();
  // --requirepass (and its file and variable) too.
  EXPECT_TRUE(Acl::Parse("", "acl", longest, &acl).ok());
  EXPECT_FALSE(Acl::Parse("", "acl", longest + "p", &acl).ok());
}

// An ACL file that is a directory opened as a stream and read as empty: the
// server started with 'default' on nopass, no authentication at all. Now
// it is an error, as a missing file is.
TEST(AclTest, AnAclFileThatIsNotARegularFileIsRefused) {
  char dir[] = "/tmp/fencedkv_acl_XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  std::shared_ptr<const Acl> acl;
  Status s = Acl::LoadFile(dir, "", &acl);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("a directory, not a file"))
      << s.ToString();
  s = Acl::LoadFile(std::string(dir) + "/missing", "", &acl);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  const std::string file = std::string(dir) + "/users.acl";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(nullptr, f);
  fputs("user default on >pw ~* +@all\n", f);
  fclose(f);
  ASSERT_TRUE(Acl::LoadFile(file, "", &acl).ok());
  EXPECT_EQ(nullptr, acl->InitialUser());  // must AUTH
  remove(file.c_str());
  rmdir(dir);
}

}  // namespace server
}  // namespace fencedkv
