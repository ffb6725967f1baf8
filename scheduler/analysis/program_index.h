// One index of a schedule's programs, built by one sweep over every rank's
// actions, that the checkers and the passes read instead of recording
// positions of their own: send/receive matching (comm_matching.h, and so the
// validator, the executable builder and every pass that takes its
// positions), the planner's program slots (memory/program_slots.h) and the
// receive placements' messages (passes/message_index.h).
//
// Index spaces: rank; program index (an action's position in its rank's
// program; a compound's parts share it); global stage; microbatch within
// its chain. Per-(stage, microbatch) tables are dense at
// stage * microbatches + mb (a stage's actions all live on the stage's rank,
// so a position needs no rank); per-stage tables by stage.
//
//   rank 0: 0F0 0SEND_F0 0RECV_B0 0B0      forward[key(0,0)] = 0, send_f = 1,
//   rank 1: 1RECV_F0 1F0 1B0 1SEND_B0      recv_b = 2, backward = 3;
//                                          forward[key(1,0)] = 1, ...
//
// The sweep never fails. What it cannot put in a table, or finds in a slot
// already taken, is a fault; the first fault of each rank is kept and the
// tables hold the first occurrence of everything else:
//   - a stage that does not exist or lives on another rank, a microbatch out
//     of range, an OVERLAP_F_B without parts or with a part that is not a
//     phase (F, B, I, W);
//   - a bubble in a lowered program; a SEND/RECV, WAIT or stage-wide action
//     in a compute-only one;
//   - a (kind, stage, microbatch) seen twice — (kind, stage) for
//     REDUCE_GRAD and WAIT_REDUCE_GRAD;
//   - a WAIT_REDUCE_GRAD before its stage's REDUCE_GRAD; an UNSHARD of an
//     unsharded stage, a RESHARD of one that is not.
// A checker accepts a program from the tables when it has no fault and its
// rules hold over the tables; otherwise its exact per-action checker names
// the first violation, worded by action_error.h (FaultStatus() words a
// fault the same way).
//
// Cost: one sweep (a handful of stores per action) and dense tables of
// stages * microbatches int32s, one per kind the program has (F, B and the
// four transfer kinds for a lowered 1F1B: 6; I, W and the WAIT_SEND tables
// only where such actions exist; fresh pages cost ~10 us each on a VM, so
// tables nobody fills are not allocated); no hashing, no sorting.
// A plain value; const methods are thread-compatible.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_PROGRAM_INDEX_H_
#define JITPIPE_SCHEDULER_ANALYSIS_PROGRAM_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// The one "not there" of every table: no action, no rank, no index.
inline constexpr int32_t kAbsent = -1;

// A stage's rank and those of its neighbours in its chain (kAbsent past the
// chain's ends), so hot loops need no division or chain arithmetic.
struct StageLink {
  int32_t rank = 0;
  int32_t prev_rank = kAbsent;
  int32_t next_rank = kAbsent;
};

// One entry per stage. REQUIRES: ValidateHeader(schedule) passed.
std::vector<StageLink> StageLinksOf(const Schedule& schedule);

// Why the sweep could not index an action (see the file comment).
enum class IndexFault : uint8_t {
  kNone,
  kBadIndices,      // stage or microbatch out of range, stage on another rank
  kEmptyCompound,   // an OVERLAP_F_B without parts
  kNotAPhase,       // a compound's part that is not F, B, I or W
  kBubbleInLowered,
  kNotComputeOnly,  // SEND/RECV, WAIT or stage-wide action in a compute-only program
  kRepeat,          // a slot already taken
  kReduceWaitFirst, // WAIT_REDUCE_GRAD before the stage's REDUCE_GRAD
  kShardOrder,      // UNSHARD while unsharded, RESHARD while not
};

// The first fault of one rank's program.
struct RankFault {
  IndexFault fault = IndexFault::kNone;
  int32_t index = kAbsent;  // program index of the action
  int32_t part = 0;         // which part of a compound
  int32_t first = kAbsent;  // kRepeat, kShardOrder (UNSHARD): where the slot was taken
};

struct ProgramIndex {
  // Indexes every rank's program. REQUIRES: ValidateHeader(schedule) passed.
  static ProgramIndex Build(const Schedule& schedule);
  // Indexes only `rank`'s program: tables hold rows for its stages alone
  // (rows), so indexing one rank costs what its program and stages do, for
  // callers that look at one rank of many schedules (the planner's peak
  // probes). Everything about other ranks is absent. REQUIRES: as Build,
  // 0 <= rank < schedule.pp.
  static ProgramIndex BuildForRank(const Schedule& schedule, int rank);

  int microbatches = 0;  // per chain: the stride of the tables
  std::vector<StageLink> stages;
  // By stage: its row in the (stage, microbatch) tables (kAbsent: not
  // indexed). Build() makes rows[s] == s, which code reading a full index
  // (CommPositions) may assume: Key(s + 1, mb) == Key(s, mb) + microbatches.
  std::vector<int32_t> rows;

  // By (stage, microbatch): the program index of each kind's action.
  // `forward` always has its rows; the transfer tables whenever the program
  // is lowered; backward, backward_input, backward_weight and the WAIT_SEND
  // tables are empty when the program has no such action: read those
  // through Get().
  std::vector<int32_t> forward, backward, backward_input, backward_weight;
  std::vector<int32_t> send_f, recv_f, send_b, recv_b;
  std::vector<int32_t> wait_send_f, wait_send_b;

  // By stage: its REDUCE_GRAD and WAIT_REDUCE_GRAD (what a WAIT_REDUCE_GRAD
  // waits for), and its (UNSHARD, RESHARD or kAbsent) pairs in order.
  std::vector<int32_t> reduce_grad, wait_reduce_grad;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> shards;

  // By rank: its first fault (none for a rank not indexed). Per-rank lists
  // of positions are not kept: a pass that needs one walks the rank's
  // program, which costs less than the fresh pages a list would take.
  std::vector<RankFault> faults;

  size_t Key(int stage, int microbatch) const {
    return static_cast<size_t>(rows[stage]) * static_cast<size_t>(microbatches) +
           static_cast<size_t>(microbatch);
  }
  int32_t At(const std::vector<int32_t>& table, int stage, int microbatch) const {
    return table[Key(stage, microbatch)];
  }
  // A table's entry, kAbsent for a table left empty.
  static int32_t Get(const std::vector<int32_t>& table, size_t key) {
    return table.empty() ? kAbsent : table[key];
  }
  // The table of a kind with a microbatch (F, B, I, W, SEND/RECV, WAIT_SEND).
  const std::vector<int32_t>& TableOf(ActionKind kind) const;
  std::vector<int32_t>& TableOf(ActionKind kind);
  size_t table_size = 0;  // entries of a table that has its rows
  // The first of a (stage, microbatch)'s I or B: where its input gradient is
  // computed and its output gradient's data produced.
  int32_t BackwardAt(size_t key) const {
    const int32_t b = Get(backward, key), i = Get(backward_input, key);
    return b == kAbsent || (i != kAbsent && i < b) ? i : b;
  }

  // Whether no indexed rank's program has a fault.
  bool clean = true;

  // `rank`'s first fault as the structure checker words it (ok if none).
  // REQUIRES: `schedule` is the indexed one.
  absl::Status FaultStatus(const Schedule& schedule, int rank) const;
};

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_PROGRAM_INDEX_H_
