// Copyright (c) fencedkv authors.
//
// EtcdClient against a real etcd (Debian's etcd-server) on loopback: reads,
// writes and transactions with binary keys, leases and their expiry, and
// the faults: a dead endpoint before a live one, etcd stopped, etcd paused.

#include "etcd_client.h"

#include <thread>

#include <gtest/gtest.h>

#include "etcd_process.h"
#include "util/testutil.h"

namespace fencedkv {
namespace server {
namespace {

using std::chrono::milliseconds;

class EtcdClientTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start(dir_.Sub("etcd")))
        << "etcd did not start (apt-get install etcd-server)";
  }
  EtcdClient::Options Opts(std::vector<std::string> endpoints) {
    EtcdClient::Options o;
    o.endpoints = std::move(endpoints);
    o.timeout = milliseconds(500);
    return o;
  }
  // True once a Get through `c` succeeds, within 10 s.
  static bool GetsAgain(EtcdClient* c) {
    const auto until = std::chrono::steady_clock::now() + milliseconds(10000);
    EtcdKv kv;
    bool found = false;
    while (!c->Get("k", &kv, &found).ok()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return true;
  }
  test::TempDir dir_;
  test::EtcdProcess etcd_;
};

TEST(EtcdBase64Test, RoundTripsAndRefusesGarbage) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n < 10; ++n) {
    std::string out;
    ASSERT_TRUE(Base64Decode(Base64Encode(all.substr(0, n)), &out));
    EXPECT_EQ(all.substr(0, n), out);
  }
  std::string out;
  ASSERT_TRUE(Base64Decode(Base64Encode(all), &out));
  EXPECT_EQ(all, out);
  EXPECT_EQ("YQ==", Base64Encode("a"));
  EXPECT_EQ("YWI=", Base64Encode("ab"));
  for (const char* bad : {"Y", "YQ=", "Y===", "YQ=a", "Y!==", "=QQQ"}) {
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
  }
}

TEST(EtcdEndpointsTest, Splits) {
  EXPECT_EQ(std::vector<std::string>({"http://a:1", "https://b:2", "http://c"}),
            SplitEtcdEndpoints("a:1,,https://b:2/,c"));
  EXPECT_TRUE(SplitEtcdEndpoints("").empty());
}

TEST_F(EtcdClientTest, ReadsWritesAndPrefixesWithBinaryKeys) {
  EtcdClient c(Opts({etcd_.endpoint()}));
  const std::string k1("p/\0a", 4), k2 = "p/\xff\xfe", k3 = "q/x";
  ASSERT_FENCEDKV_OK(c.Put(k1, std::string("v\0\1", 3)));
  ASSERT_FENCEDKV_OK(c.Put(k2, ""));
  ASSERT_FENCEDKV_OK(c.Put(k3, "3"));
  EtcdKv kv;
  bool found = false;
  int64_t rev = 0;
  ASSERT_FENCEDKV_OK(c.Get(k1, &kv, &found, &rev));
  ASSERT_TRUE(found);
  EXPECT_EQ(k1, kv.key);
  EXPECT_EQ(std::string("v\0\1", 3), kv.value);
  EXPECT_GT(kv.mod_revision, 0);
  EXPECT_EQ(kv.mod_revision, kv.create_revision);
  EXPECT_GE(rev, kv.mod_revision);
  std::vector<EtcdKv> kvs;
  ASSERT_FENCEDKV_OK(c.GetPrefix("p/", &kvs));
  ASSERT_EQ(2u, kvs.size());
  EXPECT_EQ(k1, kvs[0].key);
  EXPECT_EQ(k2, kvs[1].key);
  EXPECT_EQ("", kvs[1].value);
  ASSERT_FENCEDKV_OK(c.GetPrefix("p/", &kvs, /*limit=*/1));
  EXPECT_EQ(1u, kvs.size());
  ASSERT_FENCEDKV_OK(c.Delete(k1));
  ASSERT_FENCEDKV_OK(c.Get(k1, &kv, &found));
  EXPECT_FALSE(found);
  ASSERT_FENCEDKV_OK(c.Get("never", &kv, &found));
  EXPECT_FALSE(found);
  EXPECT_EQ(etcd_.endpoint(), c.endpoint());
}

TEST_F(EtcdClientTest, TransactionsCompareRevisions) {
  EtcdClient c(Opts({etcd_.endpoint()}));
  bool ok = false;
  std::vector<EtcdKv> got;
  // Create only if absent: once.
  ASSERT_FENCEDKV_OK(c.Txn({EtcdCompare::Absent("rec")},
                           {EtcdOp::Put("rec", "one")}, {EtcdOp::Get("rec")},
                           &ok, &got));
  EXPECT_TRUE(ok);
  ASSERT_FENCEDKV_OK(c.Txn({EtcdCompare::Absent("rec")},
                           {EtcdOp::Put("rec", "two")}, {EtcdOp::Get("rec")},
                           &ok, &got));
  EXPECT_FALSE(ok);
  ASSERT_EQ(1u, got.size());
  EXPECT_EQ("one", got[0].value);
  const int64_t rev = got[0].mod_revision;
  // Change only from the state read: the first wins, the second (same
  // revision) loses.
  ASSERT_FENCEDKV_OK(c.Txn({EtcdCompare::ModRevisionIs("rec", rev)},
                           {EtcdOp::Put("rec", "A"), EtcdOp::Put("other", "x")},
                           {}, &ok));
  EXPECT_TRUE(ok);
  ASSERT_FENCEDKV_OK(c.Txn({EtcdCompare::ModRevisionIs("rec", rev)},
                           {EtcdOp::Put("rec", "B")}, {EtcdOp::Get("rec")}, &ok,
                           &got));
  EXPECT_FALSE(ok);
  ASSERT_EQ(1u, got.size());
  EXPECT_EQ("A", got[0].value);
  EXPECT_GT(got[0].mod_revision, rev);
  // Several compares: all must hold.
  ASSERT_FENCEDKV_OK(
      c.Txn({EtcdCompare::ModRevisionIs("rec", got[0].mod_revision),
             EtcdCompare::Absent("other")},
            {EtcdOp::Delete("rec")}, {}, &ok));
  EXPECT_FALSE(ok);
  ASSERT_FENCEDKV_OK(
      c.Txn({EtcdCompare::ModRevisionIs("rec", got[0].mod_revision),
             EtcdCompare::Absent("nothing")},
            {EtcdOp::Delete("rec")}, {}, &ok));
  EXPECT_TRUE(ok);
  EtcdKv kv;
  bool found = true;
  ASSERT_FENCEDKV_OK(c.Get("rec", &kv, &found));
  EXPECT_FALSE(found);
}

TEST_F(EtcdClientTest, LeasesKeepKeysAliveUntilTheyExpire) {
  EtcdClient c(Opts({etcd_.endpoint()}));
  int64_t id = 0;
  milliseconds granted{0};
  ASSERT_FENCEDKV_OK(c.LeaseGrant(milliseconds(1500), &id, &granted));
  EXPECT_NE(0, id);
  EXPECT_GE(granted.count(), 2000);  // whole seconds, etcd's minimum 2 s
  ASSERT_FENCEDKV_OK(c.Put("live", "1", id));
  EtcdKv kv;
  bool found = false;
  ASSERT_FENCEDKV_OK(c.Get("live", &kv, &found));
  ASSERT_TRUE(found);
  EXPECT_EQ(id, kv.lease);
  milliseconds ttl{0};
  ASSERT_FENCEDKV_OK(c.LeaseKeepAlive(id, &ttl));
  EXPECT_EQ(granted, ttl);
  ASSERT_FENCEDKV_OK(c.LeaseRevoke(id));
  ASSERT_FENCEDKV_OK(c.Get("live", &kv, &found));
  EXPECT_FALSE(found);
  EXPECT_TRUE(c.LeaseKeepAlive(id, &ttl).IsNotFound());
  EXPECT_TRUE(c.LeaseRevoke(id).IsNotFound());
  // Expiry: a key on a lease nobody renews goes within its TTL (and etcd's
  // expiry check, every 500 ms).
  ASSERT_FENCEDKV_OK(c.LeaseGrant(milliseconds(2000), &id, &granted));
  ASSERT_FENCEDKV_OK(c.Put("dies", "1", id));
  const auto start = std::chrono::steady_clock::now();
  do {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_FENCEDKV_OK(c.Get("dies", &kv, &found));
  } while (found &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  EXPECT_FALSE(found);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3500));
  EXPECT_TRUE(c.LeaseKeepAlive(id, &ttl).IsNotFound());
}

TEST_F(EtcdClientTest, FailsOverToALiveEndpointAndBoundsEveryCall) {
  const std::string dead =
      "http://127.0.0.1:" + std::to_string(test::FreePort());
  EtcdClient c(Opts({dead, etcd_.endpoint()}));
  ASSERT_FENCEDKV_OK(c.Put("k", "v"));
  EXPECT_EQ(etcd_.endpoint(), c.endpoint());
  EtcdKv kv;
  bool found = false;
  ASSERT_FENCEDKV_OK(c.Get("k", &kv, &found));
  EXPECT_TRUE(found);
  // Paused: every call ends within the timeout per endpoint.
  etcd_.Pause();
  auto start = std::chrono::steady_clock::now();
  Status s = c.Get("k", &kv, &found);
  auto took = std::chrono::steady_clock::now() - start;
  etcd_.Resume();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_LT(took, milliseconds(2500));
  // Resumed, it answers again (its first answers may take longer than the
  // 500 ms timeout on a loaded machine: the client retries as its users do).
  ASSERT_TRUE(GetsAgain(&c)) << "no answer within 10 s of SIGCONT";
  // Stopped: a clear IOError naming the endpoint.
  etcd_.Stop();
  start = std::chrono::steady_clock::now();
  s = c.Put("k", "w");
  took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("127.0.0.1")) << s.ToString();
  EXPECT_LT(took, milliseconds(2500));
  // Back (same data, same port): the client goes on.
  ASSERT_TRUE(etcd_.Start(dir_.Sub("etcd")));
  ASSERT_TRUE(GetsAgain(&c)) << "no answer within 10 s of the restart";
  ASSERT_FENCEDKV_OK(c.Get("k", &kv, &found));
  EXPECT_TRUE(found);
  EXPECT_EQ("v", kv.value);
}

}  // namespace
}  // namespace server
}  // namespace fencedkv
