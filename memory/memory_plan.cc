#include "memory/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// The arena for `buffers`; the search stops at `good_enough` bytes.
ArenaLayout PlaceArena(const RankBuffers& buffers, int64_t alignment, int64_t good_enough) {
  return ChooseBestGreedyArena(ArenaIntervals(buffers), buffers.num_actions, alignment,
                               good_enough);
}

char KindLetter(BufferKind kind) {
  switch (kind) {
    case BufferKind::kInput: return 'I';
    case BufferKind::kStash: return 'S';
    case BufferKind::kOutput: return 'O';
    case BufferKind::kOutputGrad: return 'g';
    case BufferKind::kInputGrad: return 'i';
    case BufferKind::kParamGrad: return 'G';
    case BufferKind::kReduce: return 'R';
    case BufferKind::kParams: return 'P';
  }
  return '?';
}

absl::string_view AllocText(const Buffer& b) {
  return b.alloc_timing == AllocTiming::kStepStart ? "start" : "";
}

absl::string_view FreeText(const Buffer& b) {
  switch (b.free_timing) {
    case FreeTiming::kAfterAction: return "";
    case FreeTiming::kAfterSend: return "send";
    case FreeTiming::kStepEnd: return "end";
  }
  return "";
}

// The program indices MemoryMap draws: all of them, or max_rows evenly
// spaced ones with the peak's index swapped in for its nearest neighbour.
std::vector<int> MapRows(int num_actions, int max_rows, int peak_index) {
  std::vector<int> rows;
  if (num_actions <= max_rows) {
    for (int i = 0; i < num_actions; ++i) rows.push_back(i);
    return rows;
  }
  for (int r = 0; r < max_rows; ++r) {
    rows.push_back(static_cast<int>(static_cast<int64_t>(r) * (num_actions - 1) / (max_rows - 1)));
  }
  if (peak_index >= 0) {
    auto nearest = std::min_element(rows.begin(), rows.end(), [&](int a, int b) {
      return std::abs(a - peak_index) < std::abs(b - peak_index);
    });
    *nearest = peak_index;
  }
  return rows;
}

}  // namespace

std::vector<LiveInterval> ArenaIntervals(const RankBuffers& buffers) {
  std::vector<LiveInterval> out;
  out.reserve(buffers.buffers.size());
  for (const Buffer& b : buffers.buffers) out.push_back({b.bytes, b.alloc_index, b.free_index});
  return out;
}

absl::Status ValidatePlanOptions(const PlanOptions& options) {
  if (options.prefetch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefetch must be >= 0, got ", options.prefetch));
  }
  if (options.prefetch > 0 && options.policy != MemoryPolicy::kJit) {
    return absl::InvalidArgumentError("--prefetch applies to the jit policy only");
  }
  if (options.alignment <= 0 || (options.alignment & (options.alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the arena alignment must be a power of two, got ", options.alignment));
  }
  if (!(options.arena_slack >= 0) || std::isinf(options.arena_slack)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--arena-slack must be a finite number >= 0, got ", options.arena_slack));
  }
  return absl::OkStatus();
}

double RankMemoryPlan::fragmentation_ratio() const {
  return arena.arena_bytes > 0
             ? static_cast<double>(fragmentation_bytes()) / static_cast<double>(arena.arena_bytes)
             : 0.0;
}

std::string RankMemoryPlan::ToString() const {
  std::string out = absl::StrCat("rank ", rank, ", ", MemoryPolicyName(options.policy));
  if (options.prefetch > 0) absl::StrAppend(&out, " prefetch ", options.prefetch);
  absl::StrAppend(&out, ": peak ", peak.bytes, " B");
  if (options.send_completion == SendCompletionModel::kReceive) {
    absl::StrAppend(&out, " (sends complete at the peer's receive; ", post_peak.bytes,
                    " B had they completed when posted)");
  }
  if (peak.index >= 0) absl::StrAppend(&out, " at index ", peak.index, " (", peak_action, ")");
  absl::StrAppend(&out, ", lower bound ", lower_bound.bytes, " B");
  if (options.arena) {
    absl::StrAppendFormat(&out, ", arena %d B (%s), fragmentation %d B (%.2f%%)",
                          arena.arena_bytes, arena.algorithm, fragmentation_bytes(),
                          100.0 * fragmentation_ratio());
  }
  absl::StrAppend(&out, "\nbuffers live at the peak:");
  for (int id : peak_buffers) absl::StrAppend(&out, " ", id);
  absl::StrAppendFormat(&out, "\n%6s  %-11s %5s %5s %12s %6s %6s %5s %5s %12s  %s\n", "id", "kind",
                        "stage", "mb", "bytes", "alloc", "free", "from", "until", "offset",
                        "notes");
  for (int id = 0; id < static_cast<int>(buffers.buffers.size()); ++id) {
    const Buffer& b = buffers.buffers[id];
    std::string notes = b.received ? "received" : "";
    if (b.handoff_stage >= 0) {
      absl::StrAppend(&notes, notes.empty() ? "" : ", ",
                      b.kind == BufferKind::kOutput ? "input" : "output_grad", " of stage ",
                      b.handoff_stage);
    }
    absl::StrAppendFormat(
        &out, "%6d  %-11s %5d %5s %12d %6s %6s %5d %5d %12s%s\n", id, BufferKindName(b.kind),
        b.stage, b.microbatch == kNoMicrobatch ? "-" : absl::StrCat(b.microbatch), b.bytes,
        absl::StrCat(b.alloc_index, AllocText(b).empty() ? "" : "/", AllocText(b)),
        absl::StrCat(b.free_index, FreeText(b).empty() ? "" : "/", FreeText(b)), b.needed_from,
        b.needed_until, options.arena ? absl::StrCat(arena.offsets[id]) : "-",
        notes.empty() ? "" : absl::StrCat("  ", notes));
  }
  return out;
}

namespace {

// PlanRankMemory over an index of every rank's program, built once, and
// under kReceive the program's happens-before order (else null).
absl::StatusOr<RankMemoryPlan> PlanIndexedRank(const Schedule& schedule,
                                               const ProgramIndex& index, const Model& model,
                                               int rank, const PlanOptions& options,
                                               const HappensBefore* order) {
  RankMemoryPlan plan;
  plan.rank = rank;
  plan.options = options;
  ASSIGN_OR_RETURN(
      plan.buffers,
      ComputeBufferLifetimes(schedule, index, model, rank,
                             LifetimeOptions{options.policy, options.prefetch,
                                             options.send_release}));
  plan.post_peak = PeakOf(LiveBytes(plan.buffers));
  if (order != nullptr) {
    plan.buffers = HoldSentBuffers(std::move(plan.buffers), order->SendHolds(rank));
  }
  plan.peak = order != nullptr ? PeakOf(LiveBytes(plan.buffers)) : plan.post_peak;
  plan.lower_bound = PeakOf(NeededBytes(plan.buffers));
  if (plan.peak.index >= 0) {
    plan.peak_action = schedule.ranks[rank][plan.peak.index].ToString();
    plan.peak_buffers = BuffersLiveAt(plan.buffers, plan.peak.index);
  }
  if (options.arena) {
    plan.arena = PlaceArena(plan.buffers, options.alignment,
                            ArenaGoodEnough(plan.peak.bytes, options.arena_slack));
  }
  return plan;
}

}  // namespace

absl::StatusOr<std::unique_ptr<const SharedRankInputs>> SharedRankInputs::Build(
    const Schedule& schedule, SendCompletionModel send_completion) {
  RETURN_IF_ERROR(ValidateHeader(schedule));
  // Not make_unique: the constructor is private. The index and the order it
  // lends to are built where they stay.
  std::unique_ptr<SharedRankInputs> inputs(
      new SharedRankInputs(schedule, send_completion, ProgramIndex::Build(schedule)));
  if (send_completion == SendCompletionModel::kReceive && schedule.lowered) {
    ASSIGN_OR_RETURN(HappensBefore order, HappensBefore::Build(schedule, inputs->index_));
    inputs->order_.emplace(std::move(order));
  }
  return std::unique_ptr<const SharedRankInputs>(std::move(inputs));
}

absl::StatusOr<RankMemoryPlan> SharedRankInputs::PlanRank(const Model& model, int rank,
                                                          const PlanOptions& options) const {
  RETURN_IF_ERROR(ValidatePlanOptions(options));
  if (options.send_completion != send_completion_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ranks planned with --send-completion ", SendCompletionModelName(options.send_completion),
        " from inputs built for ", SendCompletionModelName(send_completion_)));
  }
  return PlanIndexedRank(*schedule_, index_, model, rank, options,
                         order_.has_value() ? &*order_ : nullptr);
}

absl::StatusOr<RankMemoryPlan> PlanRankMemory(const Schedule& schedule, const Model& model,
                                              int rank, const PlanOptions& options) {
  RETURN_IF_ERROR(ValidatePlanOptions(options));
  RETURN_IF_ERROR(ValidateHeader(schedule));
  if (options.send_completion == SendCompletionModel::kPost || !schedule.lowered) {
    // One rank's program is all it reads: indexed alone.
    return PlanIndexedRank(schedule, ProgramIndex::BuildForRank(schedule, rank), model, rank,
                           options, nullptr);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<const SharedRankInputs> inputs,
                   SharedRankInputs::Build(schedule, options.send_completion));
  return inputs->PlanRank(model, rank, options);
}

absl::StatusOr<std::vector<RankMemoryPlan>> PlanMemory(const Schedule& schedule,
                                                       const Model& model,
                                                       const PlanOptions& options,
                                                       int threads) {
  RETURN_IF_ERROR(ValidatePlanOptions(options));
  ASSIGN_OR_RETURN(std::unique_ptr<const SharedRankInputs> inputs,
                   SharedRankInputs::Build(schedule, options.send_completion));
  return ParallelMap<RankMemoryPlan>(schedule.pp, threads, [&](int rank) {
    return inputs->PlanRank(model, rank, options);
  });
}

std::string MemoryMap(const RankMemoryPlan& plan, const RankProgram& program, int columns,
                      int max_rows) {
  const int64_t arena = plan.arena.arena_bytes;
  std::string out = absl::StrFormat(
      "rank %d arena %d B, %d columns of %.6g B; I input S stash O output g output_grad "
      "i input_grad G param_grad R reduce P params . free\n",
      plan.rank, arena, columns, arena > 0 ? static_cast<double>(arena) / columns : 0.0);
  const std::vector<int64_t> live = LiveBytes(plan.buffers);
  for (int index : MapRows(plan.buffers.num_actions, std::max(2, max_rows), plan.peak.index)) {
    std::string cells(columns, '.');
    for (int id : BuffersLiveAt(plan.buffers, index)) {
      const Buffer& b = plan.buffers.buffers[id];
      const int64_t offset = plan.arena.offsets[id];
      // Cell c holds the byte (2c+1) * arena / (2 * columns): its middle.
      for (int c = 0; c < columns; ++c) {
        const double middle = (2.0 * c + 1) * static_cast<double>(arena) / (2.0 * columns);
        if (middle >= offset && middle < offset + b.bytes) cells[c] = KindLetter(b.kind);
      }
    }
    absl::StrAppendFormat(&out, "%6d %-22s |%s| %d%s\n", index, program[index].ToString(), cells,
                          live[index], index == plan.peak.index ? " <- peak" : "");
  }
  return out;
}

}  // namespace jitpipe
