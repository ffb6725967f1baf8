#include "stages/exec/timeline_transfers.h"

#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace jitpipe {

std::vector<TimelineTransfer> TimelineTransfersOf(const Executable& executable) {
  std::vector<TimelineTransfer> table;
  table.reserve(executable.transfers.size());
  // (gradient, stage, microbatch) of each transfer's data -> its id.
  absl::flat_hash_map<std::tuple<bool, int, int>, int32_t> by_data;
  for (size_t t = 0; t < executable.transfers.size(); ++t) {
    const Transfer& x = executable.transfers[t];
    table.push_back({.kind = x.kind,
                     .stage = x.stage,
                     .microbatch = x.microbatch,
                     .src_rank = x.src_rank,
                     .dst_rank = x.dst_rank,
                     .bytes = x.bytes});
    by_data[{x.kind == ActionKind::kSendB, x.stage, x.microbatch}] = static_cast<int32_t>(t);
  }
  for (const RankExecutable& rank : executable.ranks) {
    for (const ExecStep& step : rank.steps) {
      for (const ExecPart& part : rank.PartsOf(step)) {
        if (part.consumes != kNoTransfer) table[part.consumes].consumer_index = step.index;
        if (part.kind == ActionKind::kBackwardWeight) continue;
        auto it = by_data.find({part.kind != ActionKind::kForward, part.stage, part.microbatch});
        if (it != by_data.end() && table[it->second].src_rank == rank.rank) {
          table[it->second].producer_index = step.index;
        }
      }
    }
  }
  return table;
}

}  // namespace jitpipe
