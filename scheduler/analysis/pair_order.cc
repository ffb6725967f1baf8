#include "scheduler/analysis/pair_order.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/analysis/grid_report.h"
#include "scheduler/analysis/rank_pair_map.h"

namespace jitpipe {
namespace {

class PairOrderChecker {
 public:
  PairOrderChecker(const Schedule& s, const CommPositions& positions, int grid_rows,
                   absl::string_view rule)
      : s_(s), pos_(positions), grid_rows_(grid_rows), rule_(rule) {}

  // Index spaces: ordered rank pairs (src, dst) for the counters,
  // (stage, microbatch) of the sender for each SEND's ordinal.
  absl::Status Run() const {
    const Ordinals sends = SendOrdinals();
    RankPairMap<int32_t> received(s_.pp);
    for (int dst = 0; dst < s_.pp; ++dst) {
      const RankProgram& program = s_.ranks[dst];
      for (int32_t j = 0; j < static_cast<int32_t>(program.size()); ++j) {
        const Action& a = program[j];
        if (a.kind != ActionKind::kRecvF && a.kind != ActionKind::kRecvB) continue;
        const bool forward = a.kind == ActionKind::kRecvF;
        const size_t sender_key = Key(forward ? a.stage - 1 : a.stage + 1, a.microbatch);
        const int src = Partner(pos_, a).rank;
        const int32_t k = received(src, dst)++;
        if ((forward ? sends.f : sends.b)[sender_key] != k) return OrderError(dst, j, src, k);
      }
    }
    return absl::OkStatus();
  }

 private:
  // Each SEND_F / SEND_B's position among the SENDs of its pair, by the
  // sender's (stage, microbatch).
  struct Ordinals {
    std::vector<int32_t> f, b;
  };
  Ordinals SendOrdinals() const {
    RankPairMap<int32_t> sent(s_.pp);
    Ordinals ordinals{std::vector<int32_t>(pos_.send_f.size()),
                      std::vector<int32_t>(pos_.send_b.size())};
    for (int src = 0; src < s_.pp; ++src) {
      for (const Action& a : s_.ranks[src]) {
        if (a.kind != ActionKind::kSendF && a.kind != ActionKind::kSendB) continue;
        std::vector<int32_t>& table = a.kind == ActionKind::kSendF ? ordinals.f : ordinals.b;
        table[Key(a.stage, a.microbatch)] =
            sent(src, Partner(pos_, a).rank)++;
      }
    }
    return ordinals;
  }

  size_t Key(int stage, int mb) const {
    return static_cast<size_t>(stage) * pos_.microbatches + static_cast<size_t>(mb);
  }

  // The k-th RECV on dst from src (at index j) is not the partner of the
  // k-th SEND from src to dst; all earlier ones matched.
  absl::Status OrderError(int dst, int32_t j, int src, int32_t k) const {
    int32_t expected_send = kAbsent;
    for (int32_t i = 0, seen = 0; expected_send == kAbsent; ++i) {
      const Action& a = s_.ranks[src][i];
      if (IsSend(a.kind) && Partner(pos_, a).rank == dst && seen++ == k) expected_send = i;
    }
    const Action& recv = s_.ranks[dst][j];
    const Action& send = s_.ranks[src][expected_send];
    const Endpoint actual_send = Partner(pos_, recv);
    const Endpoint expected_recv = Partner(pos_, send);
    absl::Status status = absl::InvalidArgumentError(absl::StrCat(
        WhereInProgram(dst, j, recv.ToString()), ": out of order with rank ", src,
        ": rank ", src, " sends ", send.ToString(), " (index ", expected_send, ") before ",
        s_.ranks[src][actual_send.index].ToString(), " (index ", actual_send.index,
        "), but this rank receives ", recv.ToString(), " before ",
        s_.ranks[dst][expected_recv.index].ToString(), " (index ", expected_recv.index,
        "); ", rule_));
    if (grid_rows_ <= 0) return status;
    return WithGrid(std::move(status), FormatGridExcerpt(s_.ranks, j, grid_rows_));
  }

  const Schedule& s_;
  const CommPositions& pos_;
  const int grid_rows_;
  const absl::string_view rule_;
};

}  // namespace

absl::Status CheckPairOrder(const Schedule& schedule, const CommPositions& positions,
                            int grid_rows, absl::string_view rule) {
  return PairOrderChecker(schedule, positions, grid_rows, rule).Run();
}

}  // namespace jitpipe
