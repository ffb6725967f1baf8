#include "runtime/replay_merge.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "stages/exec/timeline_transfers.h"

namespace jitpipe {
namespace {

RankReplay ReplayOf(int w, const RankOutcome& out, const MergeInputs& in) {
  const int rank = w % in.pp;
  std::vector<double> exposed;
  for (const StepResult& r : out.steps) exposed.push_back(r.exposed_reduce_us);
  return {w,
          rank,
          w / in.pp,
          out.peak_bytes,
          in.plans[rank].peak.bytes,
          in.plans[rank].post_peak.bytes,
          in.plans[rank].arena.arena_bytes,
          out.heap_allocations,
          MedianOf(std::move(exposed)),
          out.allocator_peak_bytes};
}

// Appends a rank's spans and samples; the first rank appended also brings
// the transfer table.
void AppendTimeline(const RankOutcome& out, const Executable& executable, Timeline& timeline) {
  if (timeline.transfers.empty()) timeline.transfers = TimelineTransfersOf(executable);
  for (const StepResult& r : out.steps) {
    timeline.spans.insert(timeline.spans.end(), r.timeline.spans.begin(), r.timeline.spans.end());
    timeline.memory.insert(timeline.memory.end(), r.timeline.memory.begin(),
                           r.timeline.memory.end());
  }
}

}  // namespace

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

absl::StatusOr<ReplayResult> MergeOutcomes(absl::Span<const RankOutcomeOf> ranks,
                                           const MergeInputs& in) {
  if (ranks.empty()) return absl::InvalidArgumentError("no rank outcomes to merge");
  for (const RankOutcomeOf& r : ranks) {
    if (r.outcome->steps.size() != static_cast<size_t>(in.steps)) {
      return absl::InternalError(
          absl::StrCat("rank ", r.world_rank, " reported ", r.outcome->steps.size(), " steps"));
    }
  }
  ReplayResult result;
  std::vector<double> exposed(in.steps, 0.0);
  for (int step = 0; step < in.steps; ++step) {
    double start = 0, end = 0, loss = 0;
    for (size_t k = 0; k < ranks.size(); ++k) {
      const StepResult& r = ranks[k].outcome->steps[step];
      start = k == 0 ? r.start_us : std::min(start, r.start_us);
      end = std::max(end, r.end_us);
      loss += r.loss;
      exposed[step] = std::max(exposed[step], r.exposed_reduce_us);
    }
    result.step_loss.push_back(loss);
    result.step_us.push_back(end - start);
  }
  result.exposed_reduce_us = MedianOf(std::move(exposed));
  result.peak_in_flight_bytes = in.peak_in_flight_bytes;
  for (const RankOutcomeOf& r : ranks) {
    result.ranks.push_back(ReplayOf(r.world_rank, *r.outcome, in));
    if (in.record_timeline) AppendTimeline(*r.outcome, *in.executable, result.timeline);
  }
  return result;
}

}  // namespace jitpipe
