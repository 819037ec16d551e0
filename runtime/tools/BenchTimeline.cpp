#include "BenchTimeline.h"

#include "BenchProfile.h"
#include "ninfer/AtomicFile.h"
#include "ninfer/Json.h"

#include "plan_generated.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

namespace ninfer {
namespace {

struct GridEvents {
  using Ns = unsigned long long; // trace::Event's times
  Ns firstStart = std::numeric_limits<Ns>::max();
  Ns firstWait = std::numeric_limits<Ns>::max();
  Ns lastEnd = 0;
  // Per block: SM, start, end.
  std::map<uint32_t, std::pair<uint32_t, std::pair<Ns, Ns>>> blocks;
  uint32_t started = 0;
};

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", v);
  return text;
}

} // namespace

Result<std::vector<LaunchSpan>> launchSpans(const plan::Plan& p, const StepTrace& trace) {
  if (trace.recorded > trace.events.size())
    return Status::error("the timeline lost events: the step recorded " +
                         std::to_string(trace.recorded) + ", the plan's buffers kept " +
                         std::to_string(trace.events.size()) + " (" +
                         std::to_string(trace::kEventsPerSm) + " per SM)");
  std::unordered_map<unsigned long long, GridEvents> grids;
  for (const trace::Event& e : trace.events) {
    if (e.kind == trace::kUnused) // a block that never waited
      continue;
    GridEvents& g = grids[e.grid];
    auto& block = g.blocks[e.block];
    switch (e.kind) {
    case trace::kBlockStart:
      g.firstStart = std::min(g.firstStart, e.ns);
      g.started += 1;
      block.first = e.sm;
      block.second.first = e.ns;
      break;
    case trace::kWaitDone:
      g.firstWait = std::min(g.firstWait, e.ns);
      break;
    case trace::kWarpEnd:
      g.lastEnd = std::max(g.lastEnd, e.ns);
      block.second.second = std::max(block.second.second, e.ns);
      break;
    default:
      return Status::error("the timeline holds an event of unknown kind " + std::to_string(e.kind));
    }
  }
  std::vector<const GridEvents*> order;
  for (const auto& entry : grids)
    if (entry.second.started > 0) // kernels outside the plan's wrappers record no start
      order.push_back(&entry.second);
  if (order.size() != trace.launches.size())
    return Status::error("the timeline holds " + std::to_string(order.size()) +
                         " launches, the step ran " + std::to_string(trace.launches.size()));
  std::sort(order.begin(), order.end(),
            [](const GridEvents* a, const GridEvents* b) { return a->firstStart < b->firstStart; });
  const GridEvents::Ns origin = order.empty() ? 0 : order.front()->firstStart;
  auto us = [origin](GridEvents::Ns ns) { return (double(ns) - double(origin)) / 1e3; };
  std::vector<LaunchSpan> spans;
  for (size_t i = 0; i < order.size(); ++i) {
    const GridEvents& g = *order[i];
    const StepTrace::Launch& launch = trace.launches[i];
    LaunchSpan span;
    span.kernel = launch.kernel;
    span.what = launch.op == StepTrace::kNotAnOp ? std::string() : describeOp(p, launch.op);
    span.blocks = g.started;
    span.start = us(g.firstStart);
    span.waitDone =
        g.firstWait == std::numeric_limits<GridEvents::Ns>::max() ? -1.0 : us(g.firstWait);
    span.end = us(std::max(g.lastEnd, g.firstStart));
    for (const auto& [index, block] : g.blocks)
      span.blockSpans.push_back({index, block.first, us(block.second.first),
                                 us(std::max(block.second.second, block.second.first))});
    spans.push_back(std::move(span));
  }
  return spans;
}

TimelineAccount timelineAccount(const std::vector<LaunchSpan>& spans) {
  std::map<std::pair<std::string, std::string>, TimelineRow> rows;
  double previousEnd = spans.empty() ? 0.0 : spans.front().start;
  for (const LaunchSpan& s : spans) {
    TimelineRow& row = rows[{s.kernel, s.what}];
    row.kernel = s.kernel;
    row.what = s.what;
    row.calls += 1;
    row.blocks += s.blocks;
    row.share += std::max(0.0, s.end - previousEnd);
    if (s.waitDone >= 0) {
      row.waited += 1;
      row.handOver += s.waitDone - previousEnd;
      row.afterWait += s.end - s.waitDone;
      row.early += s.waitDone - s.start;
    }
    previousEnd = std::max(previousEnd, s.end);
  }
  TimelineAccount account;
  account.stepUs = spans.empty() ? 0.0 : previousEnd - spans.front().start;
  for (auto& entry : rows) {
    TimelineRow row = entry.second;
    row.blocks /= row.calls;
    const double waited = std::max(1, row.waited);
    row.handOver /= waited;
    row.afterWait /= waited;
    row.early /= waited;
    account.rows.push_back(row);
  }
  std::stable_sort(account.rows.begin(), account.rows.end(),
                   [](const TimelineRow& a, const TimelineRow& b) { return a.share > b.share; });
  return account;
}

void printTimeline(const std::vector<LaunchSpan>& spans, const std::string& title) {
  const TimelineAccount account = timelineAccount(spans);
  std::printf("\n%s (device timeline of one step as generation runs it; us)\n", title.c_str());
  std::printf("%-30s  %-34s  %5s  %6s  %9s  %6s  %9s  %9s  %9s\n", "kernel", "op", "calls",
              "blocks", "us/step", "share", "hand-over", "after", "early");
  for (const TimelineRow& r : account.rows) {
    // Launches that do not wait (the greedy pick) have no hand-over: "-".
    auto column = [&r](double v) {
      char text[16] = "-";
      if (r.waited > 0)
        std::snprintf(text, sizeof(text), "%.2f", v);
      return std::string(text);
    };
    std::printf("%-30s  %-34s  %5d  %6.0f  %9.1f  %5.1f%%  %9s  %9s  %9s\n", r.kernel.c_str(),
                r.what.c_str(), r.calls, r.blocks, r.share,
                account.stepUs > 0 ? 100.0 * r.share / account.stepUs : 0.0,
                column(r.handOver).c_str(), column(r.afterWait).c_str(), column(r.early).c_str());
  }
  std::printf("step: %.1f us from the first block's start to the last warp's end, %zu launches. "
              "us/step: each launch's end minus the previous launch's end; hand-over: from the "
              "previous launch's end to this one's first wait returning; after: from there to "
              "its end; early: from its first block's start to that wait (means per call)\n",
              account.stepUs, spans.size());
}

std::string chromeTraceJson(const std::vector<LaunchSpan>& spans) {
  std::string json = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& event) {
    json += (first ? "" : ",\n") + event;
    first = false;
  };
  add(R"j({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"launches (even)"}})j");
  add(R"j({"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"launches (odd)"}})j");
  add(R"j({"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"after the wait"}})j");
  for (size_t i = 0; i < spans.size(); ++i) {
    const LaunchSpan& s = spans[i];
    const std::string name = json::quoted(s.kernel);
    const std::string args = "\"args\":{\"launch\":" + std::to_string(i) +
                             ",\"op\":" + json::quoted(s.what) +
                             ",\"blocks\":" + std::to_string(s.blocks) + "}";
    add("{\"name\":" + name + ",\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(1 + i % 2) +
        ",\"ts\":" + number(s.start) + ",\"dur\":" + number(s.end - s.start) + "," + args + "}");
    if (s.waitDone >= 0)
      add("{\"name\":" + name + ",\"ph\":\"X\",\"pid\":1,\"tid\":3,\"ts\":" + number(s.waitDone) +
          ",\"dur\":" + number(std::max(0.0, s.end - s.waitDone)) + "," + args + "}");
    for (const LaunchSpan::Block& b : s.blockSpans)
      add("{\"name\":" + name + ",\"ph\":\"X\",\"pid\":2,\"tid\":" + std::to_string(b.sm) +
          ",\"ts\":" + number(b.start) + ",\"dur\":" + number(b.end - b.start) +
          ",\"args\":{\"launch\":" + std::to_string(i) + ",\"block\":" + std::to_string(b.index) +
          "}}");
  }
  add(R"j({"name":"process_name","ph":"M","pid":1,"args":{"name":"step"}})j");
  add(R"j({"name":"process_name","ph":"M","pid":2,"args":{"name":"blocks by SM"}})j");
  return json + "\n]}\n";
}

Status traceAndReport(Executor& executor, const plan::Plan& p, int context, int batch,
                      const std::string& jsonPath) {
  const SyntheticStep rows = syntheticDecodeStep(p, context, batch);
  const int n = static_cast<int>(rows.tokens.size());
  // The first traced step may capture its graph; the second is the one reported.
  auto step = [&] {
    return executor.traceStep(rows.tokens.data(), rows.positions.data(), rows.sequences.data(), n);
  };
  Result<StepTrace> warm = step();
  if (!warm.isOk())
    return warm.status();
  Result<StepTrace> trace = step();
  if (!trace.isOk())
    return trace.status();
  Result<std::vector<LaunchSpan>> spans = launchSpans(p, trace.value());
  if (!spans.isOk())
    return spans.status();
  printTimeline(spans.value(),
                (n > 1 ? "batch step, " + std::to_string(n) + " sequences, one token each"
                       : std::string("decode step, 1 token")) +
                    " at position " + std::to_string(context));
  const std::string json = chromeTraceJson(spans.value());
  return AtomicFile::writeWhole(jsonPath, json.data(), json.size());
}

} // namespace ninfer
