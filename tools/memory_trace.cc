#include "tools/memory_trace.h"

#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/liveness.h"

namespace jitpipe::cli {
namespace {

constexpr int kProgramTid = 1;

absl::string_view ActionCategory(const Action& action) {
  if (IsCompute(action.kind)) return "compute";
  if (IsSendRecv(action.kind)) return "p2p";
  return "stage";
}

// Samples `series` as counter `name` wherever it changes, then once at the end.
void AddCounterSeries(ChromeTraceWriter& writer, int pid, absl::string_view name,
                      const std::vector<int64_t>& series) {
  const int n = static_cast<int>(series.size());
  for (int i = 0; i < n; ++i) {
    if (i > 0 && series[i] == series[i - 1]) continue;
    writer.AddCounter({.name = name, .cat = "memory", .pid = pid, .ts_us = static_cast<double>(i),
                       .key = "bytes", .value = static_cast<double>(series[i])});
  }
  if (n > 0) {
    writer.AddCounter({.name = name, .cat = "memory", .pid = pid, .ts_us = static_cast<double>(n),
                       .key = "bytes", .value = static_cast<double>(series[n - 1])});
  }
}

}  // namespace

std::vector<int64_t> ArenaHighWater(const RankMemoryPlan& plan) {
  const std::vector<Buffer>& buffers = plan.buffers.buffers;
  std::vector<int64_t> high(plan.buffers.num_actions, 0);
  // Buffers are sorted by alloc index: sweep, keeping the live tops in a
  // max-heap and dropping the ones freed before the current index lazily.
  std::priority_queue<std::pair<int64_t, int>> tops;  // (offset + bytes, id)
  size_t next = 0;
  for (int i = 0; i < plan.buffers.num_actions; ++i) {
    for (; next < buffers.size() && buffers[next].alloc_index <= i; ++next) {
      if (buffers[next].bytes > 0) {
        tops.push({plan.arena.offsets[next] + buffers[next].bytes, static_cast<int>(next)});
      }
    }
    while (!tops.empty() && buffers[tops.top().second].free_index < i) tops.pop();
    high[i] = tops.empty() ? 0 : tops.top().first;
  }
  return high;
}

void AddPlanToTrace(const RankMemoryPlan& plan, const RankProgram& program,
                    ChromeTraceWriter& writer) {
  const int pid = plan.rank;
  writer.SetProcessName(pid, absl::StrCat("rank ", plan.rank));
  writer.SetProcessSortIndex(pid, plan.rank);
  writer.SetThreadName(pid, kProgramTid, "program");
  for (int i = 0; i < static_cast<int>(program.size()); ++i) {
    const std::string name = program[i].ToString();
    writer.AddSlice({.name = name, .cat = ActionCategory(program[i]), .pid = pid,
                     .tid = kProgramTid, .ts_us = static_cast<double>(i), .dur_us = 1});
  }
  const auto by_category = LiveBytesByCategory(plan.buffers);
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    AddCounterSeries(writer, pid,
                     absl::StrCat("mem.", MemoryCategoryName(static_cast<MemoryCategory>(c))),
                     by_category[c]);
  }
  AddCounterSeries(writer, pid, "mem.live", LiveBytes(plan.buffers));
  if (plan.options.arena) AddCounterSeries(writer, pid, "mem.arena_high", ArenaHighWater(plan));
}

}  // namespace jitpipe::cli
