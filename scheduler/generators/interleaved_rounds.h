// The stage-index machinery PyTorch's two depth-first interleaved schedules
// (Interleaved1F1B, InterleavedZeroBubble) share: Megatron's "flexible rounds"
// and the order in which a rank visits its local stages.
//
// Loop placement: rank r holds stages c*p + r for local index c in [0, v).
// A rank runs m*v forwards and m*v backwards, each numbered j in [0, m*v).
// They are dealt out in rounds of mpr = m / rounds microbatches:
//
//   rounds = max(1, m // p), mpr = m / rounds   (m % rounds == 0 required)
//   forward j:  local stage (j / mpr) % v,          microbatch (j / (mpr*v))*mpr + j % mpr
//   backward j: local stage v-1 - (j / mpr) % v,    same microbatch formula
//
//   p = 2, v = 2, m = 4 (rounds 2, mpr 2), rank 0:
//     forwards  0F0 0F1 2F0 2F1 0F2 0F3 2F2 2F3
//     backwards 2B0 2B1 0B0 0B1 2B2 2B3 0B2 0B3
#ifndef JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_ROUNDS_H_
#define JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_ROUNDS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/action.h"

namespace jitpipe {

class InterleavedRounds {
 public:
  // Errors: InvalidArgument when m is not a multiple of max(1, m // p),
  // naming the nearest valid microbatch counts, e.g.
  //   interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10
  // `name` prefixes the message.
  // REQUIRES: pp >= 1, microbatches >= 1, stages_per_rank >= 1.
  static absl::StatusOr<InterleavedRounds> Create(absl::string_view name, int pp,
                                                  int microbatches, int stages_per_rank);

  int pp() const { return pp_; }
  int stages_per_rank() const { return v_; }
  int microbatches() const { return m_; }
  int microbatches_per_round() const { return mpr_; }
  // Forwards (equally backwards) each rank runs: m * v.
  int ops_per_rank() const { return m_ * v_; }

  // Forwards rank `rank` runs before its first backward: the last rank's
  // (v-1)*mpr plus `hop_factor` per rank between it and the last rank,
  // capped at m*v. Interleaved1F1B uses hop_factor 2, the zero-bubble one 1.
  int Warmup(int rank, int hop_factor) const;

  // The rank's j-th forward, and j-th backward of `kind` (B, I or W: a W
  // carries its backward's stage and microbatch). REQUIRES: 0 <= j < m*v.
  // Inline table lookups: these run once per generated action.
  Action Forward(int rank, int j) const {
    return Action::Make(ActionKind::kForward, forward_local_[j] * pp_ + rank, microbatch_[j]);
  }
  Action Backward(int rank, int j, ActionKind kind) const {
    return Action::Make(kind, (v_ - 1 - forward_local_[j]) * pp_ + rank, microbatch_[j]);
  }

 private:
  InterleavedRounds(int pp, int microbatches, int stages_per_rank, int microbatches_per_round);

  int pp_;
  int m_;
  int v_;
  int mpr_;
  // Per j in [0, m*v), the same on every rank: the forward's local stage
  // (j / mpr) % v and the microbatch (j / (mpr*v))*mpr + j % mpr.
  std::vector<int32_t> forward_local_;
  std::vector<int32_t> microbatch_;
};

// Whether PyTorch's flexible rounds accept m microbatches on p ranks:
// m % max(1, m // p) == 0.
bool FlexibleRoundsAccept(int pp, int microbatches);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_ROUNDS_H_
