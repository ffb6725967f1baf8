// Internal to the receive-placement passes (place_recvs_just_in_time.h,
// place_recvs_jit_rendezvous.h): the point-to-point messages of a lowered
// program, numbered densely and checked to match one to one.
//
// A message is named by its RECV: RECV_F of (stage s, microbatch mb) is
// PhaseKey(s, mb), RECV_B is PhaseTableSize() + PhaseKey(s, mb). It goes over
// a directed "pair" (sender rank, receiver rank); the pair's messages are
// numbered in the sender's program order (what an ordered transport matches
// them by; the rendezvous placement keeps that order, the pure one ignores
// it). Consumers are counted among the non-RECV actions of the receiver's
// program, so positions do not depend on where the input put its RECVs.
//
// Index spaces: rank; program index; message id (2 * PhaseTableSize());
// pair id (dense, in order of first SEND).
//
// Built on the program index (scheduler/analysis/program_index.h), which
// checks every action; const methods are thread-compatible. Cost: the index,
// then one walk of the programs that looks only at transfers and consumers,
// and one of the message table.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_MESSAGE_INDEX_H_
#define JITPIPE_SCHEDULER_ANALYSIS_MESSAGE_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/analysis/rank_pair_map.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {

inline constexpr int32_t kNoMessage = kAbsent;

class MessageIndex {
 public:
  // Indexes `schedule`. Errors (the entry invariant of both placements):
  //   InvalidArgument from ValidateHeader() and for a program that is not
  //   well formed — what the program index flags (program_index.h: a bad
  //   stage or microbatch index, a bubble, an action repeated, ...), worded
  //   as Validate() words it, naming rank, index and action;
  //   FailedPrecondition for a well-formed program that is not one a
  //   placement can take: compute-only, a SEND or RECV past its chain's end,
  //   a SEND to the same rank, a SEND without its RECV on the receiving
  //   stage's rank (or the reverse), a RECV that no compute on its rank
  //   consumes.
  // `schedule` must outlive the result.
  static absl::StatusOr<MessageIndex> Build(const Schedule& schedule);

  // The message `leaf` (an F, I or B) consumes on `rank`; kNoMessage when it
  // needs no RECV there (its input comes from this rank, or it is a W).
  int32_t ConsumedBy(int rank, const Action& leaf) const {
    const int32_t m = Consumes(leaf);
    return m != kNoMessage && info_[m].receiver == rank ? m : kNoMessage;
  }
  // The message a SEND sends. REQUIRES: IsSend(send.kind).
  int32_t OfSend(const Action& send) const {
    return send.kind == ActionKind::kSendF ? Id(true, send.stage + 1, send.microbatch)
                                           : Id(false, send.stage - 1, send.microbatch);
  }
  // The RECV action of message m.
  Action RecvAction(int32_t m) const;

  int sender(int32_t m) const { return info_[m].sender; }
  int receiver(int32_t m) const { return info_[m].receiver; }
  int32_t pair(int32_t m) const { return info_[m].pair; }
  int32_t order(int32_t m) const { return info_[m].order; }  // position within its pair
  // Position of m's first consumer among the non-RECV actions of its
  // receiver's program.
  int32_t consumer(int32_t m) const { return info_[m].consumer; }
  // Whether some RECV in `rank`'s program stands after its first consumer
  // (never in LowerSendRecvEarly's output).
  bool HasRecvAfterItsConsumer(int rank) const { return late_recv_[rank]; }
  // A pair's messages in the sender's order.
  absl::Span<const int32_t> sequence(int32_t pair) const {
    return absl::MakeConstSpan(sequence_data_)
        .subspan(pair_offsets_[pair], pair_offsets_[pair + 1] - pair_offsets_[pair]);
  }
  size_t num_pairs() const { return pair_sizes_.size(); }

 private:
  MessageIndex(const Schedule& s, const ProgramIndex& x);

  int32_t Id(bool forward, int stage, int mb) const {
    return static_cast<int32_t>((forward ? 0 : table_) + static_cast<size_t>(stage) * mbs_ +
                                static_cast<size_t>(mb));
  }
  int32_t Consumes(const Action& leaf) const {
    if (leaf.kind == ActionKind::kForward) return Id(true, leaf.stage, leaf.microbatch);
    if (leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardInput) {
      return Id(false, leaf.stage, leaf.microbatch);
    }
    return kNoMessage;
  }
  absl::Status Index();
  absl::Status IndexRecv(int rank, int32_t index, const Action& a);
  absl::Status IndexSend(int rank, int32_t index, const Action& a);
  absl::Status CheckMatched() const;
  void BuildSequences();

  // Per message, together so that the replay's lookups share a cache line.
  struct Info {
    int32_t sender = kAbsent;    // rank of its SEND
    int32_t receiver = kAbsent;  // rank of its RECV
    int32_t pair = kAbsent;
    int32_t order = kAbsent;
    int32_t consumer = kAbsent;  // kAbsent: no compute consumes it
  };

  const Schedule* s_;  // borrowed
  std::vector<StageLink> links_;
  size_t mbs_;    // microbatches per chain: the stride of a stage's ids
  size_t table_;  // PhaseTableSize(): where RECV_B ids start
  std::vector<Info> info_;
  struct PairSlot {
    int32_t id = kAbsent;
  };
  RankPairMap<PairSlot> pair_index_;             // (sender, receiver) -> pair
  std::vector<bool> late_recv_;                  // per rank: HasRecvAfterItsConsumer
  std::vector<int32_t> pair_sizes_;              // per pair: its number of messages
  // Every pair's messages in the sender's order, pair after pair; pair p's
  // are [pair_offsets_[p], pair_offsets_[p + 1]).
  std::vector<size_t> pair_offsets_;
  std::vector<int32_t> sequence_data_;
};

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_MESSAGE_INDEX_H_
