// Bit allocation (BitAllocator.h): the budget always holds, more budget never
// means more error, the result is the exact optimum on small problems (checked
// by enumeration), and bad input is refused.
#include "BitAllocator.h"
#include "QuantTestUtil.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace quant {
namespace {

// Tensors with Q2/Q3/Q4/Q8 candidates at group 64: exact sizes, errors falling
// roughly 4x per bit with per-tensor sensitivity and some noise (not convex).
std::vector<AllocTensor> modelLike(test::Rng& rng, int count) {
  std::vector<AllocTensor> tensors;
  for (int t = 0; t < count; ++t) {
    AllocTensor tensor;
    tensor.name = "t" + std::to_string(t);
    const uint64_t params = 512ull * 128 * (1 + rng.below(12));
    const double sensitivity = std::exp(rng.normal());
    for (int bits : {2, 3, 4, 8}) {
      const double error = sensitivity * std::pow(4.0, -bits) * (1.0 + 0.3 * rng.uniform());
      tensor.candidates.push_back({bits, error, params * bits / 8 + params / 64 * 2});
    }
    tensors.push_back(tensor);
  }
  return tensors;
}

TEST(BitAllocator, MeetsBudgetAndIsMonotone) {
  test::Rng rng(40);
  const std::vector<AllocTensor> tensors = modelLike(rng, 40);
  uint64_t lo = 0, hi = 0;
  for (const AllocTensor& t : tensors) {
    lo += t.candidates.front().bytes;
    hi += t.candidates.back().bytes;
  }
  double previous = 0.0;
  for (int step = 0; step <= 120; ++step) {
    const uint64_t budgetBytes = lo + (hi + hi / 10 - lo) * step / 120;
    Result<Allocation> a = allocateBits(tensors, budgetBytes * 8);
    ASSERT_TRUE(a.isOk()) << a.status().message();
    ASSERT_LE(a->totalBytes, budgetBytes) << step;
    uint64_t bytes = 0;
    double error = 0.0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      bytes += tensors[t].candidates[a->choice[t]].bytes;
      error += tensors[t].weight * tensors[t].candidates[a->choice[t]].error;
    }
    EXPECT_EQ(bytes, a->totalBytes);
    EXPECT_EQ(error, a->totalError);
    if (step > 0) {
      ASSERT_LE(a->totalError, previous) << "error grew with the budget at step " << step;
    }
    previous = a->totalError;
  }
  // With room for everything, every tensor takes its best candidate.
  Result<Allocation> all = allocateBits(tensors, hi * 8);
  for (size_t t = 0; t < tensors.size(); ++t)
    EXPECT_EQ(all->choice[t], 3);
  // At the floor, every tensor takes its cheapest one.
  Result<Allocation> floor = allocateBits(tensors, lo * 8);
  EXPECT_EQ(floor->totalBytes, lo);
}

// Small problems whose byte span fits the resolution (unit = 1 byte): the DP is
// exact, so it must find the enumerated optimum.
TEST(BitAllocator, ExactOnSmallProblems) {
  test::Rng rng(41);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<AllocTensor> tensors(5);
    for (AllocTensor& t : tensors) {
      t.weight = 0.5 + rng.uniform();
      for (int c = 0; c < 3; ++c)
        t.candidates.push_back({c, rng.uniform(), 10 + rng.below(50)});
    }
    uint64_t budget = 0;
    for (const AllocTensor& t : tensors)
      budget += t.candidates[rng.below(3)].bytes;
    double best = 1e300;
    for (int code = 0; code < 243; ++code) {
      uint64_t bytes = 0;
      double error = 0.0;
      for (int t = 0, rest = code; t < 5; ++t, rest /= 3) {
        bytes += tensors[t].candidates[rest % 3].bytes;
        error += tensors[t].weight * tensors[t].candidates[rest % 3].error;
      }
      if (bytes <= budget)
        best = std::min(best, error);
    }
    Result<Allocation> a = allocateBits(tensors, budget * 8);
    ASSERT_TRUE(a.isOk());
    EXPECT_LE(a->totalBytes, budget);
    EXPECT_NEAR(a->totalError, best, 1e-12) << trial;
  }
}

TEST(BitAllocator, RefusesBadInput) {
  test::Rng rng(42);
  std::vector<AllocTensor> tensors = modelLike(rng, 3);
  uint64_t lo = 0;
  for (const AllocTensor& t : tensors)
    lo += t.candidates.front().bytes;
  Result<Allocation> a = allocateBits(tensors, lo * 8 - 8);
  ASSERT_FALSE(a.isOk());
  EXPECT_NE(a.status().message().find("below the smallest"), std::string::npos);
  tensors[1].candidates[2].error = -1.0;
  EXPECT_FALSE(allocateBits(tensors, lo * 16).isOk());
  tensors[1].candidates.clear();
  EXPECT_FALSE(allocateBits(tensors, lo * 16).isOk());
  EXPECT_TRUE(allocateBits({}, 0).isOk()); // nothing to place
}

TEST(BitAllocator, Deterministic) {
  test::Rng rng(43);
  const std::vector<AllocTensor> tensors = modelLike(rng, 20);
  uint64_t lo = 0, hi = 0;
  for (const AllocTensor& t : tensors) {
    lo += t.candidates.front().bytes;
    hi += t.candidates.back().bytes;
  }
  Result<Allocation> a = allocateBits(tensors, (lo + hi) * 4);
  Result<Allocation> b = allocateBits(tensors, (lo + hi) * 4);
  EXPECT_EQ(a->choice, b->choice);
}

} // namespace
} // namespace quant
} // namespace ninfer
