#include "scheduler/passes/place_recvs_just_in_time.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "scheduler/passes/message_index.h"
#include "scheduler/passes/pass_utils.h"

namespace jitpipe {
namespace {

// Rank `rank`'s program without its RECVs, each put back right before its
// first consumer. Index spaces: the input program's indices; the non-RECV
// actions before the current one (MessageIndex::consumer's positions).
RankProgram PlaceRank(const RankProgram& program, int rank, const MessageIndex& messages) {
  RankProgram out;
  out.reserve(program.size());
  int32_t non_recvs = 0;
  for (const Action& a : program) {
    if (IsRecv(a.kind)) continue;
    ForEachComputePart(a, [&](const Action& leaf) {
      const int32_t m = messages.ConsumedBy(rank, leaf);
      if (m != kNoMessage && messages.consumer(m) == non_recvs) {
        out.push_back(messages.RecvAction(m));
      }
    });
    out.push_back(CopyOf(a));
    ++non_recvs;
  }
  return out;
}

}  // namespace

absl::StatusOr<Schedule> PlaceRecvsJustInTime(const Schedule& in) {
  ASSIGN_OR_RETURN(const MessageIndex messages, MessageIndex::Build(in));
  std::vector<RankProgram> ranks(in.pp);
  for (int r = 0; r < in.pp; ++r) ranks[r] = PlaceRank(in.ranks[r], r, messages);
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
