// AddUnshardReshard: PyTorch's _add_unshard_reshard (FSDP parameter
// prefetch and release), with PyTorch's lookahead of 3 stages, and PyTorch
// main's split of that window in two: residency (max_active_stages: how
// many stages stay unsharded, so where RESHARD goes) and issue distance
// (unshard_lookahead: how early UNSHARD is issued).
//
// Per rank, before each action: look ahead from it (bubbles skipped) for the
// first `max_active_stages` distinct stages (an OVERLAP_F_B adds all its
// sub-actions' stages before the count is checked, so it may reach one more);
// RESHARD every active stage not among them, then UNSHARD those of the first
// `unshard_lookahead` distinct stages (counted the same way; a prefix of
// the residency window) that are not active, in lookahead order; then the
// action. After the last action the stages
// still active are RESHARDed. RESHARDs come in the iteration order of the
// Python set PyTorch keeps the active stages in (CPythonIntSet), so that the
// result equals PyTorch's exactly, also where stage numbers collide in the
// set's hash table.
//
// Before (one rank holding stages 0..3, M = 1):
//   0F0 1F0 2F0 3F0 3B0 2B0 1B0 0B0
// After:
//   0UNSHARD 1UNSHARD 2UNSHARD 0F0 0RESHARD 3UNSHARD 1F0 2F0 3F0 3B0
//   3RESHARD 0UNSHARD 2B0 2RESHARD 1B0 1RESHARD 0B0 0RESHARD
//
// Issue distance 1 unshards each stage right before its first action, e.g.
// the example above with unshard_lookahead 1:
//   0UNSHARD 0F0 0RESHARD 1UNSHARD 1F0 2UNSHARD 2F0 3UNSHARD 3F0 3B0
//   3RESHARD 2B0 2RESHARD 1B0 1RESHARD 0UNSHARD 0B0 0RESHARD
// The lookahead only delays UNSHARDs: the RESHARDs are where the residency
// window puts them, except that a stage that would leave the window without
// running (an UNSHARD and a RESHARD around nothing of it) is never gathered.
// "full" (the issue distance equals the residency window) is the old
// behaviour exactly; "auto" is PyTorch's rank-aware default, min(r + 2,
// max_active_stages) on rank r (one future stage in flight beside the
// current one, more on later ranks, whose warm-up leaves more room); a
// list gives each rank its own.
//
// With at most `max_active_stages` stages on a rank nothing is ever evicted
// early: every stage is UNSHARDed before the rank's first action and
// RESHARDed just before the action after its last. Bubbles are dropped (as
// PyTorch does); an empty program stays empty.
#ifndef JITPIPE_SCHEDULER_PASSES_ADD_UNSHARD_RESHARD_H_
#define JITPIPE_SCHEDULER_PASSES_ADD_UNSHARD_RESHARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kAddUnshardReshardPass = "add_unshard_reshard";
inline constexpr int kDefaultMaxActiveStages = 3;  // PyTorch's default

// How far ahead UNSHARD is issued, in distinct stages (see above).
struct UnshardLookahead {
  enum class Kind : uint8_t {
    kFull,     // the residency window (PyTorch's behaviour before the split)
    kAuto,     // min(rank + 2, max_active_stages)
    kFixed,    // distances[0] on every rank
    kPerRank,  // distances[rank]
  };
  Kind kind = Kind::kFull;
  std::vector<int> distances = {};

  // The distance on `rank`. REQUIRES: CheckUnshardLookahead passed.
  int ForRank(int rank, int max_active_stages) const;
  // "full", "auto", "2", "2,3,3,3": what ParseUnshardLookahead reads.
  std::string ToString() const;
};

// Reads "full", "auto", a distance N >= 1 or one distance per rank,
// comma-separated. Errors: InvalidArgument
//   unshard lookahead "x": expected full, auto, a number >= 1 or one number per rank
absl::StatusOr<UnshardLookahead> ParseUnshardLookahead(absl::string_view text);

struct UnshardReshardOptions {
  int max_active_stages = kDefaultMaxActiveStages;
  UnshardLookahead unshard_lookahead = {};
};

// OK when `options` fit a schedule of `pp` ranks; else InvalidArgument:
// max_active_stages < 1, a distance below 1 or above max_active_stages
// (a stage issued beyond the residency window would be resharded before its
// use), or a per-rank list of another length than pp.
absl::Status CheckUnshardReshardOptions(const UnshardReshardOptions& options, int pp);

// Returns the schedule with UNSHARD/RESHARD added and bubbles dropped; it is
// marked lowered (it holds non-compute actions).
// Errors: InvalidArgument for a bad stage or microbatch index, or
// max_active_stages < 1; FailedPrecondition when the input holds anything but
// compute actions and bubbles.
absl::StatusOr<Schedule> AddUnshardReshard(const Schedule& in,
                                           int max_active_stages = kDefaultMaxActiveStages);
// The same with a separate issue distance; errors also those of
// CheckUnshardReshardOptions.
absl::StatusOr<Schedule> AddUnshardReshard(const Schedule& in,
                                           const UnshardReshardOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_ADD_UNSHARD_RESHARD_H_
