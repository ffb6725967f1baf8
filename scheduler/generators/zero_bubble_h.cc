#include "scheduler/generators/zero_bubble_h.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// The three phases of a (stage, microbatch); kInput is upstream's "B". A
// plain enum: the phases index the per-phase tables below.
enum Phase : int { kForward = 0, kInput = 1, kWeight = 2 };

// Unit costs and the activation model the upstream figures are quoted for.
constexpr int kCost = 1;  // F, I and W alike
constexpr int kComm = 0;
constexpr std::array<int, 3> kMemory = {1, 0, -1};  // by Phase

// Upstream's three switches (allow_bubble_before_first_b, prioritize_b,
// no_bubble_greedy).
struct Flags {
  bool allow_bubble_before_first_i = false;
  bool prioritize_i = false;
  bool fill_bubbles_greedily = true;
};

// One run of the heuristic. It walks microbatches in order; for each it
// decides, stage by stage, whether to start one more forward now and which
// pending W to slot in first (to stay under the memory cap, or because the
// next F or I would otherwise wait for a neighbour), then places the
// microbatch's I from the last stage back to the first. Every placement is
// timed immediately (list scheduling), so the per-stage order is placement
// order.
class ZeroBubbleGreedy {
 public:
  ZeroBubbleGreedy(int stages, int microbatches, int max_memory, Flags flags)
      : p_(stages), m_(microbatches), max_memory_(max_memory), flags_(flags),
        count_(3, std::vector<int>(stages, 0)), end_(3, std::vector<int>(stages * microbatches, 0)),
        free_at_(stages, 0), memory_(stages, 0), bubble_(stages, 0), order_(stages) {
    for (auto& stage_order : order_) stage_order.reserve(3 * microbatches);
  }

  absl::Status Run();
  // The longest rank span, first F start to last W end (upstream's
  // "best_time").
  int LongestSpan() const;
  // Per stage: (phase, microbatch) in execution order.
  const std::vector<std::vector<std::pair<Phase, int>>>& order() const { return order_; }

 private:
  // Microbatch-major: a round touches every stage at about one microbatch.
  int& End(Phase phase, int stage, int mb) { return end_[phase][mb * p_ + stage]; }
  int End(Phase phase, int stage, int mb) const { return end_[phase][mb * p_ + stage]; }
  int Count(Phase phase, int stage) const { return count_[phase][stage]; }
  void Put(int stage, Phase phase);
  void Warmup();
  absl::Status Steady(int mb);
  std::vector<int> ForwardsToStart();
  absl::Status MakeRoom(int stage, Phase phase);
  void FillWeightsBefore(int stage, int dependency_ready);

  const int p_, m_, max_memory_;
  const Flags flags_;
  std::vector<std::vector<int>> count_;  // [phase][stage]: placed so far
  std::vector<std::vector<int>> end_;    // [phase][mb*p + stage]: end time
  std::vector<int> free_at_;             // [stage]: end of its last action
  std::vector<int> memory_;              // [stage]: live activation units
  std::vector<int> bubble_;              // [stage]: idle time after its first F
  int max_bubble_ = 0;                   // max of bubble_ (it only grows)
  std::vector<std::vector<std::pair<Phase, int>>> order_;
};

void ZeroBubbleGreedy::Put(int stage, Phase phase) {
  const int mb = count_[phase][stage];
  const int no_wait = free_at_[stage] + kCost;
  int end = no_wait;
  if (phase == kForward && stage > 0) {
    end = std::max(end, End(kForward, stage - 1, mb) + kComm + kCost);
  }
  if (phase == kInput && stage < p_ - 1) {
    end = std::max(end, End(kInput, stage + 1, mb) + kComm + kCost);
  }
  if (Count(kForward, stage) > 0) {
    bubble_[stage] += end - no_wait;
    max_bubble_ = std::max(max_bubble_, bubble_[stage]);
  }
  free_at_[stage] = end;
  End(phase, stage, mb) = end;
  memory_[stage] += kMemory[phase];
  ++count_[phase][stage];
  order_[stage].emplace_back(phase, mb);
}

// Microbatch 0: its F on every stage, then as many extra forwards per stage
// as fit before its I arrives back there (each stage at most as many as the
// stage before it), then its I from the last stage to the first.
void ZeroBubbleGreedy::Warmup() {
  for (int j = 0; j < p_; ++j) Put(j, kForward);
  std::vector<int> extra(p_, 0);
  int i_arrives = End(kForward, p_ - 1, 0) + kCost;  // the last stage's I0 end
  for (int j = p_ - 2; j >= 0; --j) {
    int memory = memory_[j];
    int t = free_at_[j];
    while (Count(kForward, j) + extra[j] < m_ && memory + kMemory[kForward] <= max_memory_) {
      const bool fits = flags_.allow_bubble_before_first_i ? t + kCost <= i_arrives + kComm
                                                           : t < i_arrives + kComm;
      if (!fits) break;
      memory += kMemory[kForward];
      t += kCost;
      ++extra[j];
    }
    i_arrives = std::max(t, i_arrives + kComm) + kCost;
  }
  for (int j = 1; j < p_; ++j) {
    while (extra[j] > 0 && extra[j] >= extra[j - 1] && Count(kForward, j) + extra[j] < m_) {
      --extra[j];
    }
  }
  for (int j = 0; j < p_; ++j) {
    for (int k = 0; k < extra[j]; ++k) Put(j, kForward);
  }
  for (int j = p_ - 1; j >= 0; --j) Put(j, kInput);
}

// Which stages start one more forward in this round (0 or 1 each); a stage
// only does if every later stage does too.
std::vector<int> ZeroBubbleGreedy::ForwardsToStart() {
  std::vector<int> start(p_, 0);
  for (int j = 0; j < p_; ++j) {
    if (Count(kForward, j) >= m_) continue;
    // With prioritize_i, a stage two or more forwards ahead of the next one
    // holds its forward back when it would delay the next stage's F + I.
    if (flags_.prioritize_i && j + 1 < p_ && Count(kForward, j) >= Count(kForward, j + 1) + 2) {
      const int next_done = free_at_[j + 1] + kCost + kCost + kComm;
      if (free_at_[j] >= next_done) continue;
      int weights_needed = 0;
      int memory = memory_[j] + kMemory[kForward];
      while (memory > max_memory_ && Count(kWeight, j) + weights_needed < Count(kInput, j)) {
        memory += kMemory[kWeight];
        ++weights_needed;
      }
      if (free_at_[j] + kCost + weights_needed * kCost <= next_done) {
        start[j] = 1;
        continue;
      }
      if (next_done - free_at_[j] <= max_bubble_ - bubble_[j]) continue;
    }
    start[j] = 1;
  }
  for (int j = p_ - 2; j >= 0; --j) start[j] = std::min(start[j], start[j + 1]);
  return start;
}

// Places pending W until one more `phase` action fits under the cap.
absl::Status ZeroBubbleGreedy::MakeRoom(int stage, Phase phase) {
  while (memory_[stage] + kMemory[phase] > max_memory_) {
    if (Count(kWeight, stage) >= Count(kInput, stage)) {
      return absl::InternalError(absl::StrCat("zero-bubble heuristic: stage ", stage,
                                              " cannot fit its memory cap of ", max_memory_));
    }
    Put(stage, kWeight);
  }
  return absl::OkStatus();
}

// Places pending W while they end before the next action's dependency is
// ready; one more W that would end after it is placed when the wait would
// exceed the stage's slack against the worst stage's idle time, or always
// under fill_bubbles_greedily.
void ZeroBubbleGreedy::FillWeightsBefore(int stage, int dependency_ready) {
  auto pending = [&] { return Count(kWeight, stage) < Count(kInput, stage); };
  while (pending() && free_at_[stage] + kCost <= dependency_ready) Put(stage, kWeight);
  if (pending() && free_at_[stage] < dependency_ready) {
    const bool within_slack =
        dependency_ready - free_at_[stage] <= max_bubble_ - bubble_[stage];
    if (!within_slack || flags_.fill_bubbles_greedily) Put(stage, kWeight);
  }
}

// One round of the steady phase: the forwards ForwardsToStart picks, each
// after the W that must or may go first, then microbatch `mb`'s I on every
// stage, last stage first.
absl::Status ZeroBubbleGreedy::Steady(int mb) {
  const std::vector<int> start = ForwardsToStart();
  for (int j = 0; j < p_; ++j) {
    if (start[j] == 0) continue;
    RETURN_IF_ERROR(MakeRoom(j, kForward));
    if (j > 0) FillWeightsBefore(j, End(kForward, j - 1, Count(kForward, j)) + kComm);
    Put(j, kForward);
  }
  for (int j = p_ - 1; j >= 0; --j) {
    RETURN_IF_ERROR(MakeRoom(j, kInput));
    if (j + 1 < p_) FillWeightsBefore(j, End(kInput, j + 1, mb) + kComm);
    // The first stage, done with forwards, clears its W before each I.
    if (j == 0 && Count(kForward, j) == m_) {
      while (Count(kWeight, j) < Count(kInput, j)) Put(j, kWeight);
    }
    Put(j, kInput);
  }
  return absl::OkStatus();
}

absl::Status ZeroBubbleGreedy::Run() {
  Warmup();
  for (int mb = 1; mb < m_; ++mb) RETURN_IF_ERROR(Steady(mb));
  // What is left is each stage's trailing W.
  for (int j = 0; j < p_; ++j) {
    while (Count(kWeight, j) < m_) Put(j, kWeight);
  }
  return absl::OkStatus();
}

int ZeroBubbleGreedy::LongestSpan() const {
  int longest = 0;
  for (int j = 0; j < p_; ++j) {
    const int first_f_end = End(kForward, j, 0);
    const int last_w_end = End(kWeight, j, m_ - 1);
    longest = std::max(longest, last_w_end - first_f_end + kCost);
  }
  return longest;
}

using StageOrders = std::vector<std::vector<std::pair<Phase, int>>>;

// Runs all eight flag combinations in upstream's order and keeps the first
// with the shortest longest span.
absl::StatusOr<StageOrders> BestOrder(int pp, int microbatches, int max_memory) {
  StageOrders best;
  int best_span = 0;
  for (bool allow_bubble : {true, false}) {
    for (bool prioritize : {true, false}) {
      for (bool greedy : {true, false}) {
        ZeroBubbleGreedy run(pp, microbatches, max_memory, Flags{allow_bubble, prioritize, greedy});
        RETURN_IF_ERROR(run.Run());
        if (best.empty() || run.LongestSpan() < best_span) {
          best_span = run.LongestSpan();
          best = run.order();
        }
      }
    }
  }
  return best;
}

absl::StatusOr<Schedule> GenerateWithCap(absl::string_view name, int pp, int microbatches,
                                         int stages_per_rank, int max_memory) {
  if (stages_per_rank != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": stages per rank must be 1 (one stage per rank), got ", stages_per_rank));
  }
  ASSIGN_OR_RETURN(const StageOrders orders, BestOrder(pp, microbatches, max_memory));
  Schedule s;
  s.name = std::string(name);
  s.pp = pp;
  s.stages_per_rank = 1;
  s.microbatches = microbatches;
  s.placement = Placement::kLoop;
  s.stage_to_rank = StageToRank(Placement::kLoop, pp, 1);
  s.ranks.resize(pp);
  constexpr std::array<ActionKind, 3> kKinds = {ActionKind::kForward, ActionKind::kBackwardInput,
                                                ActionKind::kBackwardWeight};
  for (int stage = 0; stage < pp; ++stage) {
    s.ranks[stage].reserve(orders[stage].size());
    for (const auto& [phase, mb] : orders[stage]) {
      s.ranks[stage].push_back(Action::Make(kKinds[phase], stage, mb));
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<Schedule> GenerateZeroBubbleH1(int pp, int microbatches, int stages_per_rank) {
  return GenerateWithCap("zb-h1", pp, microbatches, stages_per_rank, pp);
}

absl::StatusOr<Schedule> GenerateZeroBubbleH2(int pp, int microbatches, int stages_per_rank) {
  return GenerateWithCap("zb-h2", pp, microbatches, stages_per_rank, 2 * pp);
}

}  // namespace jitpipe
