#include "scheduler/generators/interleaved_rounds.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

int Rounds(int pp, int microbatches) { return std::max(1, microbatches / pp); }

}  // namespace

bool FlexibleRoundsAccept(int pp, int microbatches) {
  return microbatches % Rounds(pp, microbatches) == 0;
}

absl::StatusOr<InterleavedRounds> InterleavedRounds::Create(absl::string_view name, int pp,
                                                            int microbatches,
                                                            int stages_per_rank) {
  const int rounds = Rounds(pp, microbatches);
  if (microbatches % rounds == 0) {
    return InterleavedRounds(pp, microbatches, stages_per_rank, microbatches / rounds);
  }
  // A refused m has rounds >= 2, so m >= 2p; every m < 2p is accepted (one
  // round) and so is every multiple of p: both searches end within p steps.
  int below = microbatches - 1;
  while (!FlexibleRoundsAccept(pp, below)) --below;
  int above = microbatches + 1;
  while (!FlexibleRoundsAccept(pp, above)) ++above;
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": ", microbatches, " microbatches is not a multiple of max(1, ", microbatches,
      " // ", pp, ") = ", rounds, "; use ", below, " or ", above));
}

InterleavedRounds::InterleavedRounds(int pp, int microbatches, int stages_per_rank,
                                     int microbatches_per_round)
    : pp_(pp), m_(microbatches), v_(stages_per_rank), mpr_(microbatches_per_round),
      forward_local_(static_cast<size_t>(microbatches) * stages_per_rank),
      microbatch_(forward_local_.size()) {
  for (int j = 0; j < static_cast<int>(forward_local_.size()); ++j) {
    forward_local_[j] = (j / mpr_) % v_;
    microbatch_[j] = (j / (mpr_ * v_)) * mpr_ + j % mpr_;
  }
}

int InterleavedRounds::Warmup(int rank, int hop_factor) const {
  const int last_rank_warmup = (v_ - 1) * mpr_;
  return std::min(last_rank_warmup + hop_factor * (pp_ - 1 - rank), m_ * v_);
}

}  // namespace jitpipe
