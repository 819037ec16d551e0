// ninferc's memory check (MemoryFit.h): which plans fit a card, and that each change its error
// names would, alone, make the plan fit.
#include "MemoryFit.h"

#include "ninfer/KvFormat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

namespace ninfer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
constexpr int kLayers = 32, kKvHeads = 8, kHeadDim = 128;

// An 8B-shaped plan: `parameters` weights of `bitsPerWeight` bits and the K and V caches of
// every layer at `context` positions, f16 or int8.
plan::PlanT makePlan(int context, double bitsPerWeight, bool int8Kv = false) {
  plan::PlanT p;
  p.context = context;
  p.model = std::make_unique<plan::ModelInfoT>();
  p.model->parameters = 8'000'000'000ull;
  p.model->layers = kLayers;
  p.model->kv_heads = kKvHeads;
  p.model->head_dim = kHeadDim;
  p.memory = std::make_unique<plan::MemoryPlanT>();
  p.memory->weight_bytes = static_cast<uint64_t>(p.model->parameters * bitsPerWeight / 8);
  p.memory->activation_bytes = 100 * kMiB;
  p.memory->workspace_bytes = kMiB;
  const uint64_t cache = int8Kv ? uint64_t(kv::q8CacheBytes(context, kKvHeads, kHeadDim))
                                : uint64_t(2) * context * kKvHeads * kHeadDim;
  p.memory->kv_bytes = 2 * kLayers * cache;
  auto buffer = std::make_unique<plan::BufferT>();
  buffer->kind = plan::BufferKind::KvCache;
  buffer->dtype = int8Kv ? plan::DType::Q8_KV : plan::DType::F16;
  p.buffers.push_back(std::move(buffer));
  return p;
}

Target card(double gib) { return {"test-card", "sm_89", static_cast<uint64_t>(gib * kGiB)}; }

// The number after `prefix` in `text`, or -1.
long long numberAfter(const std::string& text, const std::string& prefix) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(prefix + "([0-9]+)")))
    return -1;
  return std::stoll(m[1]);
}

TEST(MemoryFit, PlansThatFitAndCardsWithoutAKnownSizePass) {
  EXPECT_EQ(memoryFitError(makePlan(8192, 4.25), card(16)), "");
  EXPECT_EQ(memoryFitError(makePlan(8192, 16), Target{"sm_89", "sm_89", 0}), "");
  EXPECT_EQ(planDeviceBytes(makePlan(8192, 4.25)),
            8'000'000'000ull * 4.25 / 8 + 2ull * kLayers * 2 * 8192 * kKvHeads * kHeadDim +
                101 * kMiB + kRuntimeReserveBytes);
}

TEST(MemoryFit, TheContextItNamesIsTheLongestThatFits) {
  const Target target = card(7.6);
  const std::string error = memoryFitError(makePlan(32768, 4.25), target);
  EXPECT_THAT(error, HasSubstr("the plan needs 8."));
  EXPECT_THAT(error, HasSubstr("but test-card has 7.60 GiB"));
  const long long context = numberAfter(error, "lower --ctx to at most ");
  ASSERT_GT(context, 0) << error;
  EXPECT_EQ(memoryFitError(makePlan(int(context), 4.25), target), "");
  EXPECT_NE(memoryFitError(makePlan(int(context) + 1, 4.25), target), "");
}

TEST(MemoryFit, Int8KvIsNamedWhereItWouldFit) {
  const std::string error = memoryFitError(makePlan(32768, 4.25), card(7.6));
  const long long int8Mib = numberAfter(error, "--kv-dtype int8 \\(KV cache 4096 -> about ");
  const plan::PlanT int8Plan = makePlan(32768, 4.25, true);
  EXPECT_EQ(int8Mib, std::llround(double(int8Plan.memory->kv_bytes) / kMiB)) << error;
  EXPECT_EQ(memoryFitError(int8Plan, card(7.6)), "");
  // Where int8 would not fit either, it is not offered; an int8 plan is not offered it again.
  EXPECT_THAT(memoryFitError(makePlan(131072, 4.25), card(7.6)), Not(HasSubstr("--kv-dtype")));
  EXPECT_THAT(memoryFitError(makePlan(131072, 4.25, true), card(7.6)),
              Not(HasSubstr("--kv-dtype")));
}

TEST(MemoryFit, SixteenBitWeightsAreOfferedQuantization) {
  const std::string error = memoryFitError(makePlan(4096, 16), card(7.6));
  const double weights = 8e9 * 2; // bytes of 8B 16-bit weights; q4 takes 4.25 bits of 16
  char expected[96];
  std::snprintf(expected, sizeof(expected), "--quant q4 (weights %.2f -> about %.2f GiB)",
                weights / kGiB, weights * 4.25 / 16 / kGiB);
  EXPECT_THAT(error, HasSubstr(expected));
  EXPECT_THAT(error, Not(HasSubstr("--ctx")));
  EXPECT_EQ(memoryFitError(makePlan(4096, 4.25), card(7.6)), "");
  // Weights already at 4 bits that alone exceed the card.
  EXPECT_THAT(memoryFitError(makePlan(4096, 4.25), card(4.0)),
              HasSubstr(": the weights alone do not fit"));
}

} // namespace
} // namespace ninfer
