// PassPipeline: an ordered list of named passes over a Schedule, the shape of
// XLA's HloPassPipeline without its size.
//
//   PassPipeline pipeline("lower");
//   pipeline.AddPass("split_backward", SplitBackward)
//           .AddPass("lower_send_recv_early", LowerSendRecvEarly);
//   pipeline.SetInvariantChecker(ValidateLowering);
//   ASSIGN_OR_RETURN(PipelineResult result,
//                    pipeline.Run(schedule, {.dump_after = "split_backward"}));
//
// Each pass is a pure function; the pipeline feeds each pass's output to the
// next. A pass added with AddInPlacePass takes its program by value and may
// reuse its storage: the pipeline moves its own intermediate programs into
// it (and copies the caller's input, which it never modifies). The
// invariant checker (when options.check_invariants, by default in debug
// builds) runs after every pass and may not modify anything; a failure
// there is a bug in the pass. `dump_after` records one pass's output, the
// text IR a --dump-after flag prints.
//
// Errors name the pass; status payloads (the validator's grid) are kept:
//   a pass's own error, its code kept:   "pass lower_send_recv_early: <message>"
//   an invariant violated after a pass:  Internal, "invariant violated after pass
//                                        split_backward: <message>"
//   dump_after naming no pass:           InvalidArgument listing the pass names.
//
// Thread-compatible: Run() is const and may be called concurrently; adding
// passes is not.
#ifndef JITPIPE_SCHEDULER_PASSES_PASS_PIPELINE_H_
#define JITPIPE_SCHEDULER_PASSES_PASS_PIPELINE_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

#ifdef NDEBUG
inline constexpr bool kCheckInvariantsByDefault = false;
#else
inline constexpr bool kCheckInvariantsByDefault = true;
#endif

using PassFunction = std::function<absl::StatusOr<Schedule>(const Schedule&)>;
using InPlacePassFunction = std::function<absl::StatusOr<Schedule>(Schedule)>;
using InvariantChecker = std::function<absl::Status(const Schedule&)>;

struct PipelineRunOptions {
  bool check_invariants = kCheckInvariantsByDefault;
  std::string dump_after;  // a pass name; "" records nothing
};

struct PipelineResult {
  Schedule schedule;               // the last pass's output
  std::optional<Schedule> dumped;  // the output of options.dump_after, when set
};

class PassPipeline {
 public:
  explicit PassPipeline(std::string name) : name_(std::move(name)) {}

  // Appends a pass. REQUIRES: `name` differs from the names added before.
  PassPipeline& AddPass(std::string name, PassFunction pass);
  PassPipeline& AddInPlacePass(std::string name, InPlacePassFunction pass);
  // Sets the checker run after every pass when options.check_invariants.
  void SetInvariantChecker(InvariantChecker checker) { checker_ = std::move(checker); }

  // The pass names, in order.
  std::vector<std::string> PassNames() const;

  // Runs the passes in order on `input` (which is not modified). With no
  // passes the result is a copy of the input.
  absl::StatusOr<PipelineResult> Run(const Schedule& input,
                                     const PipelineRunOptions& options = {}) const;
  // The same, owning the input: it is released once the first pass has
  // read it (an in-place first pass takes it without a copy), so that the
  // input and the last passes' programs are never all in memory at once.
  absl::StatusOr<PipelineResult> Run(Schedule&& input,
                                     const PipelineRunOptions& options = {}) const;

 private:
  // Run() over `borrowed`, or over `*owned` when it is set (then consumed).
  absl::StatusOr<PipelineResult> RunOn(const Schedule& borrowed, Schedule* owned,
                                       const PipelineRunOptions& options) const;

  struct Pass {
    std::string name;
    PassFunction run;             // set for AddPass
    InPlacePassFunction consume;  // set for AddInPlacePass
  };

  std::string name_;
  std::vector<Pass> passes_;
  InvariantChecker checker_;
};

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_PASS_PIPELINE_H_
