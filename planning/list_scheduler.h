// A greedy list scheduler that builds a compute-only schedule for any
// placement from stage costs and a memory cap per rank: the building block
// of the auto scheduler (auto_schedule.h) and of the zero-bubble heuristic
// (zero_bubble_heuristic.h).
//
// It runs the step on a clock. Index spaces: stage s (0 .. S-1, one chain),
// microbatch j (0 .. m-1), rank r (stage_to_rank[s]). Dependencies:
//   F(s, j) after F(s-1, j) (+ the transfer when on another rank);
//   I(s, j) after I(s+1, j) (+ transfer), or after F(s, j) on the last stage;
//   W(s, j) after I(s, j); per stage, Fs, Is and Ws each in microbatch order.
// Whenever a rank is idle at time T it picks, among the actions ready by T:
//   - an I, when prefer_backward (and the F below is not preferred);
//   - an F, when the rank's live activation bytes stay within its cap, its
//     microbatches in flight (F done, W not) stay within max_in_flight, both
//     keeping room for one microbatch of each later stage on the rank, and,
//     with warmup_limit, its forwards before its first backward stay within
//     1F1B's warm-up depth (the rank's distance to the end of the chain, +1);
//   - else a pending W: always when memory blocks an F; when the rank would
//     otherwise idle, if fill_idle_with_w is kGreedy, or if the W ends before
//     the next action becomes ready (kWhenItFits); never otherwise until its
//     other work is done.
// Among Fs (and among Is) the higher stage goes first when depth_first
// (finish microbatches, as V schedules do), the lower otherwise. With
// feed_idle_first, the ready F or I whose consumer's rank frees up first
// goes first. With
// split_backward false, an I's W follows it at once as one B. Each rank's
// program is its actions in start order.
//
// Live bytes count, per stage and microbatch, the activation bytes from F to
// W (stash + input); the exact plan may differ (outputs until sent, receive
// buffers): callers verify with the memory planner.
//
// Pure; thread-compatible. Cost: O(actions x (stages per rank + ranks)).
#ifndef JITPIPE_PLANNING_LIST_SCHEDULER_H_
#define JITPIPE_PLANNING_LIST_SCHEDULER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class FillWithW : uint8_t {
  kNever,      // only when memory blocks an F or nothing else is left
  kWhenItFits, // when the W ends before the rank's next action is ready
  kGreedy,     // whenever the rank would idle
};

struct ListScheduleParams {
  int pp = 0;
  int microbatches = 0;
  int stages_per_rank = 1;
  Placement placement = Placement::kLoop;  // kLoop or kV
  bool split_backward = true;
  bool prefer_backward = true;
  bool depth_first = true;
  bool warmup_limit = false;
  // Between ready actions, the one whose consumer on another rank will idle
  // soonest (an F feeds the next stage's rank, an I the previous one's);
  // prefer_backward and depth_first break ties.
  bool feed_idle_first = false;
  // Keep room for one microbatch of each later stage on the rank (see
  // above); without it a tight cap can leave a V rank stuck (the build then
  // fails with ResourceExhausted), but where it does not, more warm-up fits.
  bool reserve_for_later_stages = true;
  FillWithW fill = FillWithW::kGreedy;
  int max_in_flight = std::numeric_limits<int>::max();
  std::vector<int64_t> cap_bytes = {};  // per rank; empty: no cap
  std::string name = "auto";            // Schedule::name of the result
};

// Per-stage inputs, from a per-stage cost model.
struct StageTimes {
  std::vector<double> forward_us, backward_input_us, backward_weight_us;
  std::vector<int64_t> activation_bytes;  // stash + input, F to W
  std::vector<double> send_forward_us;    // transfer of stage s's output to s+1
  std::vector<double> send_backward_us;   // transfer of stage s's input gradient to s-1
};

// The inputs for `stages` stages under `model` and a placement.
StageTimes StageTimesOf(const Model& model, const std::vector<int>& stage_to_rank);

// Builds the schedule. Errors: InvalidArgument for pp, microbatches or
// stages_per_rank < 1, a placement other than kLoop / kV, a cap_bytes of
// the wrong size, or `times` not sized for the stages; ResourceExhausted
// when the caps (or max_in_flight) leave every rank unable to go on (e.g. a
// cap below one microbatch's activations).
absl::StatusOr<Schedule> BuildListSchedule(const ListScheduleParams& params,
                                           const StageTimes& times);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_LIST_SCHEDULER_H_
