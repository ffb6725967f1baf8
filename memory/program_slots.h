// Internal to memory/: where each action of one rank's lowered program sits,
// per (stage, microbatch) and per stage, checked for what buffer lifetimes
// rely on. ComputeBufferLifetimes (buffer_lifetimes.h) is built on it.
//
// A view of one rank over the program index (scheduler/analysis/
// program_index.h), which holds every position already: building it reads
// the rank's stages' tables and checks the lifetimes' rules there, and walks
// the rank's program once for where its compute actions are.
//
// Index spaces: program index (0 .. n-1); global stage; local stage (the
// stage's position among the rank's stages); microbatch within the chain.
// Per-(stage, microbatch) slots are dense at local * microbatches + mb.
#ifndef JITPIPE_MEMORY_PROGRAM_SLOTS_H_
#define JITPIPE_MEMORY_PROGRAM_SLOTS_H_

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr int kNoSlot = kAbsent;

// Program indices of one (stage, microbatch)'s actions; kNoSlot if absent.
struct MicrobatchSlots {
  int f = kNoSlot, i = kNoSlot, w = kNoSlot, b = kNoSlot;
  int recv_f = kNoSlot, recv_b = kNoSlot, send_f = kNoSlot, send_b = kNoSlot;
  int wait_send_f = kNoSlot, wait_send_b = kNoSlot;  // PyTorch main's WAIT_SEND_F / _B

  int Backward() const { return b != kNoSlot ? b : i; }  // the first of I/B
  int LastBackward() const { return std::max({i, w, b}); }
};

struct StageSlots {
  int reduce = kNoSlot;
  int wait_reduce = kNoSlot;                // its WAIT_REDUCE_GRAD
  int first_grad = kNoSlot;                 // the first W or B
  std::vector<std::pair<int, int>> shards;  // (UNSHARD, RESHARD or kNoSlot)
};

class ProgramSlots {
 public:
  // Views `rank`'s program through `index` = ProgramIndex::Build(schedule).
  // Errors, InvalidArgument "rank R, index I (ACTION): ...": the rank's
  // index fault (ProgramIndex::FaultStatus: a bubble, a stage not on the
  // rank, a microbatch out of range, an action repeated, UNSHARD/RESHARD out
  // of pairs, a WAIT_REDUCE_GRAD without a REDUCE_GRAD before it); a
  // SEND/RECV without a neighbour stage on another rank; and per (stage,
  // microbatch): a backward or send before its F, a RECV_F missing or after
  // F, a SEND_F missing, a RECV_B missing or after the first I/B, a SEND_B
  // missing or before it, a RECV without its consumer, a WAIT_SEND without
  // its SEND before it.
  // `schedule` and `index` must outlive the result.
  // REQUIRES: 0 <= rank < schedule.pp.
  static absl::StatusOr<ProgramSlots> Build(const Schedule& schedule, const ProgramIndex& index,
                                            int rank);

  const Schedule& schedule() const { return *schedule_; }
  int num_actions() const { return static_cast<int>(schedule_->ranks[rank_].size()); }
  const std::vector<int>& stages() const { return stages_; }  // ascending
  int LocalOf(int stage) const { return local_[stage]; }      // kNoSlot: not on this rank
  int microbatches() const { return index_->microbatches; }
  MicrobatchSlots At(int stage, int mb) const;
  const StageSlots& ForStage(int stage) const { return stage_slots_[local_[stage]]; }

  // The program index of the k-th compute action before `index`, or 0 when
  // fewer than k precede it. REQUIRES: k >= 1.
  int ComputeActionBefore(int index, int k) const;

  // Where a stage's neighbours in its chain run: on another rank or this one.
  bool PrevRemote(int stage) const;
  bool PrevLocal(int stage) const;
  bool NextRemote(int stage) const;
  bool NextLocal(int stage) const;

 private:
  ProgramSlots(const Schedule& schedule, const ProgramIndex& index, int rank);
  absl::Status WalkProgram();
  absl::Status CheckOrder(int stage, int mb) const;
  absl::Status Error(int index, absl::string_view what) const;

  const Schedule* schedule_;
  const ProgramIndex* index_;
  int rank_;
  std::vector<int> stages_;
  std::vector<int> local_;               // global stage -> local stage
  std::vector<StageSlots> stage_slots_;  // per local stage
  std::vector<int> computes_;            // program indices of the compute actions
};

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_PROGRAM_SLOTS_H_
