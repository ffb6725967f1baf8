#include "scheduler/passes/place_recvs_just_in_time.h"

#include <cassert>
#include <iterator>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/analysis/message_index.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

// The RECV that `leaf` (an F, I or B) consumes: RECV_F or RECV_B of its own
// stage and microbatch.
Action RecvFor(const Action& leaf) {
  return SimpleAction(leaf.kind == ActionKind::kForward ? ActionKind::kRecvF : ActionKind::kRecvB,
                      leaf.stage, leaf.microbatch);
}

// Reorders rank `rank`'s program in place: its RECVs are dropped, and each is
// put back right before its first consumer. Index spaces: the input
// program's indices; the non-RECV actions before the current one
// (MessageIndex::consumer's positions).
//
// Writing at `out` while reading at i is safe while out <= i, which holds
// when every RECV stands before its consumer (RECVs only move later, so no
// more are written than were read). Otherwise the input is read from
// `scratch`, a copy (one buffer for every rank).
void PlaceRank(RankProgram& program, int rank, const MessageIndex& messages,
               RankProgram& scratch) {
  const bool copy = messages.HasRecvAfterItsConsumer(rank);
  if (copy) {
    scratch.assign(std::make_move_iterator(program.begin()),
                   std::make_move_iterator(program.end()));
  }
  RankProgram& in = copy ? scratch : program;
  size_t out = 0;
  int32_t non_recvs = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (IsRecv(in[i].kind)) continue;
    Action a = std::move(in[i]);
    ForEachComputePart(a, [&](const Action& leaf) {
      const int32_t m = messages.ConsumedBy(rank, leaf);
      if (m != kNoMessage && messages.consumer(m) == non_recvs) program[out++] = RecvFor(leaf);
    });
    program[out++] = std::move(a);
    ++non_recvs;
  }
  // Every RECV comes back exactly once: MessageIndex::Build matched each one
  // to a consumer on this rank.
  assert(out == program.size());
}

}  // namespace

absl::StatusOr<Schedule> PlaceRecvsJustInTime(Schedule in) {
  ASSIGN_OR_RETURN(const MessageIndex messages, MessageIndex::Build(in));
  RankProgram scratch;
  for (int r = 0; r < in.pp; ++r) PlaceRank(in.ranks[r], r, messages, scratch);
  in.lowered = true;
  return in;
}

}  // namespace jitpipe
