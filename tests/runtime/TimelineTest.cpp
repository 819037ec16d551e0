// `ninfer bench --timeline`'s host side (runtime/tools/BenchTimeline.cpp) on hand-made
// events: grids ordered by their first block's start and matched to the step's launches,
// per-launch and per-block spans, the per-kernel account, the lost-event and mismatch
// errors, and the Chrome trace's events. The device side runs in tests/gpu/TimelineTest.cpp.
#include "BenchTimeline.h"
#include "CountOf.h"
#include "TestPlan.h"

#include "ninfer/Plan.h"

#include <gtest/gtest.h>

#include <string>

namespace ninfer {
namespace {

// A plan whose op 1 is a 64 -> 32 f32 linear (what the launches' op column names).
std::unique_ptr<PlanFile> linearPlan() {
  test::PlanMaker pm(32, 16, 4);
  const uint32_t table =
      pm.addWeight("table", plan::DType::F32, {32, 64}, std::vector<float>(32 * 64, 0.5f));
  const uint32_t head =
      pm.addWeight("head", plan::DType::F32, {32, 64}, std::vector<float>(32 * 64, 0.25f));
  const uint32_t x = pm.addActivation("x", 64);
  plan::EmbeddingAttrsT e;
  e.dim = 64;
  e.vocab = 32;
  pm.addOp("embed", e, {pm.tokens(), table}, {x});
  plan::LinearAttrsT lin;
  lin.in_features = 64;
  lin.out_features = 32;
  lin.last_row_only = true;
  pm.addOp("head", lin, {x, head}, {pm.logits()});
  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(pm.write("timeline.nplan"));
  EXPECT_TRUE(file.isOk()) << file.status().message();
  return file.isOk() ? std::move(file.value()) : nullptr;
}

trace::Event event(unsigned long long grid, unsigned long long ns, unsigned int block,
                   unsigned short sm, trace::EventKind kind) {
  trace::Event e;
  e.grid = grid;
  e.ns = ns;
  e.block = block;
  e.sm = sm;
  e.kind = kind;
  return e;
}

// Three launches: grid 20 (blocks 0, 1) from 1,000 ns, grid 11 (one block) from 5,000 ns,
// grid 15 (one block, which never waits) from 9,000 ns; the grid ids are not in launch order.
StepTrace threeLaunches() {
  StepTrace t;
  t.launches = {{0, "k0_embedding"}, {1, "k1_linear"}, {1, "k1_linear"}};
  t.events = {
      event(11, 6000, 0, 3, trace::kWaitDone),   event(20, 1000, 0, 1, trace::kBlockStart),
      event(20, 1500, 1, 2, trace::kBlockStart), event(20, 2000, 0, 1, trace::kWaitDone),
      event(20, 4000, 0, 1, trace::kWarpEnd),    event(20, 4500, 1, 2, trace::kWarpEnd),
      event(20, 4200, 1, 2, trace::kWarpEnd),    event(11, 5000, 0, 3, trace::kBlockStart),
      event(11, 8000, 0, 3, trace::kWarpEnd),    event(15, 9000, 0, 4, trace::kBlockStart),
      event(15, 7000, 0, 4, trace::kUnused),     event(15, 9500, 0, 4, trace::kWarpEnd),
      event(30, 9700, 0, 5, trace::kWaitDone), // a kernel outside the wrappers: no start
  };
  t.recorded = t.events.size();
  return t;
}

TEST(Timeline, LaunchSpansInLaunchOrder) {
  std::unique_ptr<PlanFile> file = linearPlan();
  ASSERT_TRUE(file);
  Result<std::vector<LaunchSpan>> spans = launchSpans(file->plan(), threeLaunches());
  ASSERT_TRUE(spans.isOk()) << spans.status().message();
  ASSERT_EQ(spans->size(), 3u);
  const LaunchSpan &a = (*spans)[0], &b = (*spans)[1], &c = (*spans)[2];
  EXPECT_EQ(a.kernel, "k0_embedding");
  EXPECT_EQ(a.what, "Embedding");
  EXPECT_EQ(b.what, "Linear 64->32 F32 last row");
  EXPECT_EQ(a.blocks, 2u);
  EXPECT_DOUBLE_EQ(a.start, 0.0);
  EXPECT_DOUBLE_EQ(a.waitDone, 1.0);
  EXPECT_DOUBLE_EQ(a.end, 3.5); // the last warp of block 1
  ASSERT_EQ(a.blockSpans.size(), 2u);
  EXPECT_EQ(a.blockSpans[1].sm, 2u);
  EXPECT_DOUBLE_EQ(a.blockSpans[1].start, 0.5);
  EXPECT_DOUBLE_EQ(a.blockSpans[1].end, 3.5);
  EXPECT_DOUBLE_EQ(b.start, 4.0);
  EXPECT_DOUBLE_EQ(b.waitDone, 5.0);
  EXPECT_DOUBLE_EQ(b.end, 7.0);
  EXPECT_DOUBLE_EQ(c.waitDone, -1.0); // its unused slot is no wait
  EXPECT_DOUBLE_EQ(c.end, 8.5);
}

TEST(Timeline, AccountAddsUpToTheStep) {
  std::unique_ptr<PlanFile> file = linearPlan();
  ASSERT_TRUE(file);
  Result<std::vector<LaunchSpan>> spans = launchSpans(file->plan(), threeLaunches());
  ASSERT_TRUE(spans.isOk()) << spans.status().message();
  const TimelineAccount account = timelineAccount(*spans);
  EXPECT_DOUBLE_EQ(account.stepUs, 8.5);
  ASSERT_EQ(account.rows.size(), 2u);
  // The linear: 7.0 - 3.5 and 8.5 - 7.0; one call waited, 1.5 us after the embedding ended.
  const TimelineRow &linear = account.rows[0], &embedding = account.rows[1];
  EXPECT_EQ(linear.kernel, "k1_linear");
  EXPECT_EQ(linear.calls, 2);
  EXPECT_EQ(linear.waited, 1);
  EXPECT_DOUBLE_EQ(linear.share, 5.0);
  EXPECT_DOUBLE_EQ(linear.handOver, 1.5);
  EXPECT_DOUBLE_EQ(linear.afterWait, 2.0);
  EXPECT_DOUBLE_EQ(linear.early, 1.0);
  EXPECT_DOUBLE_EQ(embedding.share, 3.5);
  EXPECT_DOUBLE_EQ(embedding.blocks, 2.0);
  EXPECT_DOUBLE_EQ(linear.share + embedding.share, account.stepUs);
}

TEST(Timeline, RefusesLostEventsAndOtherLaunches) {
  std::unique_ptr<PlanFile> file = linearPlan();
  ASSERT_TRUE(file);
  StepTrace lost = threeLaunches();
  lost.recorded += 1;
  Result<std::vector<LaunchSpan>> spans = launchSpans(file->plan(), lost);
  ASSERT_FALSE(spans.isOk());
  EXPECT_NE(spans.status().message().find("lost events"), std::string::npos);
  StepTrace more = threeLaunches();
  more.launches.push_back({1, "k1_linear"});
  spans = launchSpans(file->plan(), more);
  ASSERT_FALSE(spans.isOk());
  EXPECT_NE(spans.status().message().find("holds 3 launches, the step ran 4"), std::string::npos)
      << spans.status().message();
}

TEST(Timeline, ChromeTraceHasEveryLaunchAndBlock) {
  std::unique_ptr<PlanFile> file = linearPlan();
  ASSERT_TRUE(file);
  Result<std::vector<LaunchSpan>> spans = launchSpans(file->plan(), threeLaunches());
  ASSERT_TRUE(spans.isOk()) << spans.status().message();
  const std::string json = chromeTraceJson(*spans);
  // 3 launches, 2 of which waited, and 4 blocks.
  EXPECT_EQ(test::countOf(json, "\"ph\":\"X\""), 3u + 2u + 4u);
  EXPECT_EQ(test::countOf(json, "\"pid\":1,\"tid\":3,\"ts\""), 2u); // after the waits
  EXPECT_NE(json.find("\"ts\":4.000,\"dur\":3.000"), std::string::npos) << json;
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 3), "]}\n");
}

} // namespace
} // namespace ninfer
