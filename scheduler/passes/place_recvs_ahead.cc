#include "scheduler/passes/place_recvs_ahead.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/message_index.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

// The leaf (F, or I standing for I/B) that consumes `recv`, for
// MessageIndex::ConsumedBy.
Action ConsumerLeaf(const Action& recv) {
  return SimpleAction(recv.kind == ActionKind::kRecvF ? ActionKind::kForward
                                                      : ActionKind::kBackwardInput,
                      recv.stage, recv.microbatch);
}

Action RecvOfLeaf(const Action& leaf) {
  return SimpleAction(leaf.kind == ActionKind::kForward ? ActionKind::kRecvF : ActionKind::kRecvB,
                      leaf.stage, leaf.microbatch);
}

// One RECV posted ahead (k > 0): before non-RECV action `slot`, ordered
// among the others there by its input index.
struct Ahead {
  int32_t slot = 0;
  size_t input_index = 0;
  Action recv;
};

// Index spaces: the input program's indices (i); the non-RECV actions
// (slots: MessageIndex::consumer's positions, the same in input and
// output); the compute actions among them (computes[q] = slot of the q-th).
absl::StatusOr<RankProgram> PlaceRank(const RankProgram& in, int rank,
                                      const MessageIndex& messages,
                                      const RecvOffsets& offsets) {
  std::vector<int32_t> computes;  // slot of each compute action
  std::vector<int32_t> compute_at_or_after;  // per slot: the next compute's number
  int32_t slots = 0;
  for (const Action& a : in) {
    if (IsRecv(a.kind)) continue;
    compute_at_or_after.push_back(static_cast<int32_t>(computes.size()));
    if (IsCompute(a.kind)) computes.push_back(slots);
    ++slots;
  }
  std::vector<Ahead> ahead;
  int32_t slot = 0;  // non-RECVs before input index i
  for (size_t i = 0; i < in.size(); ++i) {
    const Action& a = in[i];
    if (!IsRecv(a.kind)) {
      ++slot;
      continue;
    }
    const int k = offsets.For(a);
    if (k < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("receive offset of ", a.ToString(), " on rank ", rank, " is ", k,
                       "; it must be >= 0 compute actions"));
    }
    if (k == 0) continue;  // put back right before its consumer below
    const int32_t m = messages.ConsumedBy(rank, ConsumerLeaf(a));
    const int32_t consumer = messages.consumer(m);
    const int32_t q = compute_at_or_after[consumer];  // the consumer's compute number
    const int32_t kth = k > q ? 0 : computes[q - k];
    ahead.push_back({std::min(consumer, std::max(slot, kth)), i, a});
  }
  std::stable_sort(ahead.begin(), ahead.end(),
                   [](const Ahead& x, const Ahead& y) { return x.slot < y.slot; });
  RankProgram out;
  out.reserve(in.size());
  size_t next = 0;  // into `ahead`
  slot = 0;
  for (const Action& a : in) {
    if (IsRecv(a.kind)) continue;
    for (; next < ahead.size() && ahead[next].slot == slot; ++next) {
      out.push_back(ahead[next].recv);
    }
    ForEachComputePart(a, [&](const Action& leaf) {
      const int32_t m = messages.ConsumedBy(rank, leaf);
      if (m == kNoMessage || messages.consumer(m) != slot) return;
      const Action recv = RecvOfLeaf(leaf);
      if (offsets.For(recv) == 0) out.push_back(recv);
    });
    out.push_back(CopyOf(a));
    ++slot;
  }
  // Every RECV comes back once: MessageIndex::Build matched each one to a
  // consumer on this rank, and no slot exceeds its consumer's.
  assert(out.size() == in.size());
  return out;
}

}  // namespace

std::string RecvOffsets::Histogram() const {
  std::map<int, int> counts;
  for (const auto& [key, k] : ahead) ++counts[k];
  std::string out;
  for (const auto& [k, n] : counts) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", "k=",
                    k == kRecvAheadAll ? std::string("all") : absl::StrCat(k), ": ", n);
  }
  return out.empty() ? "no receives" : out;
}

absl::StatusOr<Schedule> PlaceRecvsAhead(const Schedule& in, const RecvOffsets& offsets) {
  ASSIGN_OR_RETURN(const MessageIndex messages, MessageIndex::Build(in));
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (int r = 0; r < in.pp; ++r) {
    ASSIGN_OR_RETURN(RankProgram program, PlaceRank(in.ranks[r], r, messages, offsets));
    ranks.push_back(std::move(program));
  }
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

absl::StatusOr<RecvOffsets> RecvLeads(const Schedule& lowered) {
  ASSIGN_OR_RETURN(const MessageIndex messages, MessageIndex::Build(lowered));
  RecvOffsets leads;
  for (int r = 0; r < lowered.pp; ++r) {
    // computes[s]: compute actions among the first s non-RECV actions.
    std::vector<int32_t> computes_before = {0};
    for (const Action& a : lowered.ranks[r]) {
      if (IsRecv(a.kind)) continue;
      computes_before.push_back(computes_before.back() + (IsCompute(a.kind) ? 1 : 0));
    }
    int32_t slot = 0;
    for (const Action& a : lowered.ranks[r]) {
      if (!IsRecv(a.kind)) {
        ++slot;
        continue;
      }
      const int32_t consumer = messages.consumer(messages.ConsumedBy(r, ConsumerLeaf(a)));
      leads.ahead[RecvKey::Of(a)] =
          std::max(0, computes_before[consumer] - computes_before[std::min(slot, consumer)]);
    }
  }
  return leads;
}

}  // namespace jitpipe
