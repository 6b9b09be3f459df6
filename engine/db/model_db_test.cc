// Copyright (c) fencedkv authors.
//
// Randomized comparison against a trivial model (LevelDB's ModelDB idea,
// util/model_db.h): a std::map of values plus a std::map of domain max
// tokens, with the SPEC's acceptance rule written out independently.
// Thousands of random Put / Delete / Write / WriteGroup / AdvanceFence / Get /
// GetFenced / GetFence / floor operations with random tokens are applied to
// both and compared at every step, and after reopens and compactions.

#include "util/model_db.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

#include "fencedkv/db.h"

#include "util/testutil.h"

namespace fencedkv {

namespace {

using test::ModelDB;

struct ModelCase {
  const char* domain;
  FenceMode mode;
  size_t cache_bytes;
  const char* memtable = "skiplist";
  size_t value_cache = 0;  // Options::value_cache_size
};

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.domain << "/" << FenceModeName(c.mode) << "/cache=" << c.cache_bytes
      << "/" << c.memtable << "/values=" << c.value_cache;
}

class ModelDBTest : public testing::TestWithParam<ModelCase> {};

std::string Contents(DB* db) {
  std::string out;
  auto it = db->NewIterator(ReadOptions());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out += std::string(it->key()) + "=" + std::string(it->value()) + ";";
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

TEST_P(ModelDBTest, RandomizedAgainstModel) {
  const ModelCase& c = GetParam();
  test::TempDir dir;
  Options options;
  options.create_if_missing = true;
  options.fence_domain = c.domain;
  options.fence_mode = c.mode;
  options.fence_cache_bytes = c.cache_bytes;
  options.memtable = c.memtable;
  options.value_cache_size = c.value_cache;
  std::unique_ptr<DB> db;
  ASSERT_FENCEDKV_OK(DB::Open(options, dir.path(), &db));
  FenceDomainSpec spec;
  ASSERT_FENCEDKV_OK(FenceDomainSpec::Parse(c.domain, &spec));
  ModelDB model(spec, c.mode);

  const uint32_t seed =
      testing::UnitTest::GetInstance()->random_seed() +
      static_cast<uint32_t>(std::hash<std::string>()(c.domain));
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t n) { return rng() % n; };
  std::vector<std::string> keys;
  for (int d = 0; d < 6; ++d) {
    for (int k = 0; k < 5; ++k) {
      keys.push_back("d" + std::to_string(d) + ":{t" + std::to_string(k % 3) +
                     "}:" + std::to_string(k));
    }
  }
  Token base = 20;
  auto token = [&]() -> Token {
    if (uniform(50) == 0) base += 1 + uniform(5);
    int64_t t =
        static_cast<int64_t>(base) + static_cast<int64_t>(uniform(9)) - 5;
    return t < 1 ? 1 : static_cast<Token>(t);
  };
  const int kSteps = 4000;
  for (int step = 0; step < kSteps; ++step) {
    const std::string& k = keys[uniform(keys.size())];
    const Token t = token();
    const std::string v = "v" + std::to_string(step);
    const uint64_t op = uniform(100);
    SCOPED_TRACE("step " + std::to_string(step) + " key " + k + " token " +
                 std::to_string(t));
    if (op < 30) {
      ASSERT_EQ(model.Put(k, v, t),
                test::StatusString(db->Put(WriteOptions(), k, v, t)));
    } else if (op < 40) {
      ASSERT_EQ(model.Delete(k, t),
                test::StatusString(db->Delete(WriteOptions(), k, t)));
    } else if (op < 45) {
      // WriteGroup: independent batches, checked in order, one RocksDB write.
      // One in four is large: more domains than the write path scans
      // linearly (16), so repeats are found through its hashed index.
      const uint64_t nb = uniform(4) == 0 ? 8 + uniform(12) : 2 + uniform(3);
      std::vector<WriteBatch> batches(nb);
      std::vector<const WriteBatch*> ptrs;
      std::vector<std::string> want;
      std::vector<int> want_index;
      for (uint64_t b = 0; b < nb; ++b) {
        std::vector<ModelDB::BatchOp> ops;
        const uint64_t n = 1 + uniform(3);
        for (uint64_t i = 0; i < n; ++i) {
          const bool is_put = uniform(4) != 0;
          const std::string& bk = keys[uniform(keys.size())];
          const Token bt = token();
          ops.emplace_back(is_put, bk,
                           is_put ? v + "g" + std::to_string(b) : "", bt);
          if (is_put) {
            batches[b].Put(bk, std::get<2>(ops.back()), bt);
          } else {
            batches[b].Delete(bk, bt);
          }
        }
        int idx = -1;
        want.push_back(model.Write(ops, &idx));
        want_index.push_back(idx);
        ptrs.push_back(&batches[b]);
      }
      std::vector<Status> statuses(nb);
      ASSERT_FENCEDKV_OK(
          db->WriteGroup(WriteOptions(), ptrs.data(), nb, statuses.data()));
      for (uint64_t b = 0; b < nb; ++b) {
        ASSERT_EQ(want[b], test::StatusString(statuses[b])) << "batch " << b;
        if (statuses[b].IsStaleToken()) {
          ASSERT_EQ(want_index[b], statuses[b].stale()->batch_index);
        }
      }
    } else if (op < 50) {
      std::vector<std::tuple<bool, std::string, std::string, Token>> ops;
      WriteBatch batch;
      const uint64_t n = 1 + uniform(6);
      for (uint64_t i = 0; i < n; ++i) {
        const bool is_put = uniform(4) != 0;
        const std::string& bk = keys[uniform(keys.size())];
        const Token bt = token();
        ops.emplace_back(is_put, bk, is_put ? v + "b" + std::to_string(i) : "",
                         bt);
        if (is_put) {
          batch.Put(bk, std::get<2>(ops.back()), bt);
        } else {
          batch.Delete(bk, bt);
        }
      }
      int want_index = -1;
      std::string want = model.Write(ops, &want_index);
      Status s = db->Write(WriteOptions(), batch);
      ASSERT_EQ(want, test::StatusString(s));
      if (s.IsStaleToken()) {
        ASSERT_EQ(want_index, s.stale()->batch_index);
      }
    } else if (op < 55) {
      Token after = 0;
      ASSERT_FENCEDKV_OK(db->AdvanceFence(WriteOptions(), k, t, &after));
      ASSERT_EQ(model.Advance(k, t), after);
    } else if (op < 64) {
      std::string value;
      Status s = db->Get(ReadOptions(), k, &value);
      ASSERT_EQ(model.Get(k), s.ok() ? value : test::StatusString(s));
    } else if (op < 70) {
      // MultiGet of a few keys (repeats and an invalid empty key included)
      // must answer each as Get does.
      std::vector<std::string> mkeys;
      const size_t m = 1 + uniform(8);
      for (size_t j = 0; j < m; ++j)
        mkeys.push_back(keys[uniform(keys.size())]);
      if (uniform(8) == 0) mkeys.push_back(std::string());
      std::vector<std::string_view> views(mkeys.begin(), mkeys.end());
      std::vector<std::string> values(mkeys.size(), "unchanged");
      std::vector<Status> statuses(mkeys.size());
      db->MultiGet(ReadOptions(), mkeys.size(), views.data(), values.data(),
                   statuses.data());
      for (size_t j = 0; j < mkeys.size(); ++j) {
        std::string one = "unchanged";
        Status s1 = db->Get(ReadOptions(), mkeys[j], &one);
        ASSERT_EQ(test::StatusString(s1), test::StatusString(statuses[j]))
            << mkeys[j];
        ASSERT_EQ(one, values[j]) << mkeys[j];
        if (!mkeys[j].empty()) {
          ASSERT_EQ(model.Get(mkeys[j]), statuses[j].ok()
                                             ? values[j]
                                             : test::StatusString(statuses[j]));
        }
      }
    } else if (op < 85) {
      std::string value;
      Token max = 0;
      Status s = db->GetFenced(ReadOptions(), k, t, &value, &max);
      ASSERT_EQ(model.GetFenced(k, t), s.ok() ? value : test::StatusString(s));
      ASSERT_EQ(model.Reported(k), max);
    } else if (op < 98) {
      Token max = 0;
      ASSERT_FENCEDKV_OK(db->GetFence(k, &max));
      ASSERT_EQ(model.Reported(k), max);
    } else if (op < 99) {
      // Mostly raise the floor a little behind the live tokens; sometimes
      // try to lower it.
      Token f = uniform(4) == 0 && model.floor() > 1
                    ? model.floor() - 1
                    : (base > 12 ? base - 10 : 1);
      ASSERT_EQ(model.SetFloor(f),
                test::StatusString(db->SetFenceFloor(WriteOptions(), f)));
    } else {
      if (uniform(2) == 0) {
        db.reset();
        ASSERT_FENCEDKV_OK(DB::Open(options, dir.path(), &db));
      } else {
        ASSERT_FENCEDKV_OK(db->Flush());
        ASSERT_FENCEDKV_OK(db->CompactRange(nullptr, nullptr));
      }
    }
    if (step % 500 == 0) {
      ASSERT_EQ(model.Contents(), Contents(db.get()));
    }
  }
  // Final: everything, then again after a reopen and a full compaction.
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(model.Contents(), Contents(db.get()));
    for (const auto& k : keys) {
      Token max = 0;
      ASSERT_FENCEDKV_OK(db->GetFence(k, &max));
      ASSERT_EQ(model.Reported(k), max) << k;
    }
    db.reset();
    ASSERT_FENCEDKV_OK(DB::Open(options, dir.path(), &db));
    ASSERT_FENCEDKV_OK(db->CompactRange(nullptr, nullptr));
  }
}

// Far more domains than the smallest cache (64 KiB: 1024 buckets of two)
// holds, with tokens of many holders that rise and interleave: entries are
// evicted all the time, so writes below a stripe's mark are decided by the
// cache's miss bound or a read. Not one may differ from the model's verdict.
TEST(ModelDBOverflowTest, AnOverflowingCacheRefusesEveryStaleWrite) {
  for (FenceMode mode : {FenceMode::kMonotonic, FenceMode::kStrict}) {
    SCOPED_TRACE(FenceModeName(mode));
    test::TempDir dir;
    Options options;
    options.create_if_missing = true;
    options.fence_mode = mode;
    options.fence_domain = "prefix:4";
    options.fence_cache_bytes = 64 << 10;
    std::unique_ptr<DB> db;
    ASSERT_FENCEDKV_OK(DB::Open(options, dir.path(), &db));
    FenceDomainSpec spec;
    ASSERT_FENCEDKV_OK(FenceDomainSpec::Parse("prefix:4", &spec));
    ModelDB model(spec, mode);
    std::mt19937_64 rng(testing::UnitTest::GetInstance()->random_seed());
    // 64 holders whose tokens rise now and then, over 4000 domains.
    std::vector<Token> holders(64);
    Token next = 1;
    for (Token& h : holders) h = next++;
    int stale = 0;
    for (int step = 0; step < 12000; ++step) {
      if (rng() % 100 == 0) holders[rng() % holders.size()] = next++;
      const Token t = holders[rng() % holders.size()];
      char key[16];
      std::snprintf(key, sizeof(key), "%04u:x",
                    static_cast<unsigned>(rng() % 4000));
      const std::string want = model.Put(key, "v", t);
      ASSERT_EQ(want, test::StatusString(db->Put(WriteOptions(), key, "v", t)))
          << "step " << step << " key " << key << " token " << t;
      if (want != "OK") ++stale;
      if (step == 6000) {  // a reopen starts the bounds from the mark again
        db.reset();
        ASSERT_FENCEDKV_OK(DB::Open(options, dir.path(), &db));
      }
    }
    EXPECT_GT(stale, 500);  // the workload did exercise refusals
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDomains, ModelDBTest,
    testing::Values(
        ModelCase{"key", FenceMode::kMonotonic, 64 << 20},
        ModelCase{"key", FenceMode::kStrict, 64 << 20},
        ModelCase{"key", FenceMode::kMonotonic, 256 << 10},
        ModelCase{"prefix:2", FenceMode::kMonotonic, 64 << 20},
        ModelCase{"prefix:2", FenceMode::kStrict, 256 << 10},
        ModelCase{"delimiter::", FenceMode::kMonotonic, 0},
        ModelCase{"hashtag", FenceMode::kMonotonic, 64 << 20},
        ModelCase{"hashtag", FenceMode::kStrict, 0},
        // Iterators over the hash memtable must still see every
        // key in order (and the fence records of prefix domains).
        ModelCase{"key", FenceMode::kMonotonic, 64 << 20, "hash"},
        ModelCase{"prefix:2", FenceMode::kStrict, 0, "hash"},
        // Reads through the value cache: roomy, and so small
        // that it evicts all the time.
        ModelCase{"key", FenceMode::kMonotonic, 64 << 20, "hash", 8 << 20},
        ModelCase{"prefix:2", FenceMode::kMonotonic, 0, "skiplist", 16 << 10}),
    [](const testing::TestParamInfo<ModelCase>& info) {
      std::string name =
          std::string(info.param.domain) + "_" +
          FenceModeName(info.param.mode) + "_cache" +
          std::to_string(info.param.cache_bytes) + "_" + info.param.memtable +
          (info.param.value_cache > 0
               ? "_values" + std::to_string(info.param.value_cache)
               : "");
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

}  // namespace

}  // namespace fencedkv
