#include "scheduler/execution/rank_cursor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jitpipe {

std::string RankCursor::ToString(const Schedule& schedule) const {
  const Instruction& in = current_;
  auto where = [&] { return absl::StrCat(in.index, " (", action(in.index).ToString(), ")"); };
  auto ids = [&] { return absl::StrCat("{", absl::StrJoin(in.buffers, ","), "}"); };
  switch (in.step) {
    case Step::kBegin:
      return absl::StrCat("kBegin ", ids());
    case Step::kWait: {
      const Wait& w = in.wait;
      const std::string target = schedule.ranks[w.rank][w.index].ToString();
      return absl::StrCat("kWait before ", where(), ": rank ", w.rank,
                          w.threshold > w.index ? " runs " : " reaches ", target, " (index ",
                          w.index, ")");
    }
    case Step::kAllocate:
      return absl::StrCat("kAllocate before ", where(), " ", ids());
    case Step::kRun:
      return absl::StrCat("kRun ", where(), in.buffers.empty() ? "" : " ",
                          in.buffers.empty() ? "" : ids());
    case Step::kRelease:
      return absl::StrCat("kRelease after ", where(), " ", ids());
    case Step::kEnd:
      return absl::StrCat("kEnd ", ids());
    case Step::kDone:
      return "kDone";
  }
  return "?";
}

std::vector<RankCursor> MakeCursors(const Schedule& schedule, const CommPositions& positions,
                                    WaitModel model,
                                    absl::Span<const RankMemoryEvents* const> memory) {
  std::vector<RankCursor> cursors;
  cursors.reserve(schedule.pp);
  for (int r = 0; r < schedule.pp; ++r) {
    cursors.emplace_back(schedule, positions, r, model, memory.empty() ? nullptr : memory[r]);
  }
  return cursors;
}

}  // namespace jitpipe
