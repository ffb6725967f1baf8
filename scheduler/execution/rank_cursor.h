// The rank state machine: a cursor over one rank's lowered program that
// answers "what next": begin the step, wait for this, allocate these
// buffers, run this action, release these, end the step, done. Every driver
// of a program walks the same cursor and only decides *how* each
// instruction happens:
//
//   driver                         a wait                      time
//   deadlock check (deadlock.h)    pc thresholds (program      none
//                                  order)
//   lock-step replay (lock_step.h) the same, one action per    steps
//                                  rank per step
//   simulator (stages/)            the same; the transfer's    virtual, from the
//                                  end time                    cost model
//   rank executor (stages/)        Test / Wait on the RECV's   real
//                                  request
//
// so the rules of who waits for what (wait_rules.h) and when memory comes
// and goes (memory_events.h) are written once, and predicted and measured
// memory agree by construction.
//
// The instructions of one step, for a program a_0 .. a_{n-1}:
//
//   kBegin                         buffers: RankMemoryEvents::at_start
//   for each action i:
//     kWait      (each wait of a_i that ActionWaits names, in order)
//     kAllocate  buffers: AllocatedBefore(i)      (skipped when empty)
//     kRun       a_i; for a SEND, buffers: ReleasedOnCompletion(i), to
//                release once its transfer has completed
//     kRelease   buffers: ReleasedAfter(i)        (skipped when empty)
//   kEnd                           buffers: at_end, after everything in
//                                  flight (sends, reductions) completed
//
// A WAIT action (WAIT_SEND_F/B, WAIT_REDUCE_GRAD) is an action like any
// other: its kWait names what it waits for (kSendDone: the peer's RECV of
// this rank's SEND, kReduction: this rank's REDUCE_GRAD), and a sent buffer
// that lives until it is among its kRelease buffers, e.g. rank 0 of
// 0F0 0SEND_F0 0RECV_B0 0B0 0WAIT_SEND_F0 with a jit plan: ..., kRun 3
// (0B0), kWait{rank 1 runs 1RECV_F0}, kRun 4 (0WAIT_SEND_F0), kRelease{out}.
//   kDone
//
// e.g. rank 1 of a lowered 1F1B pp2 (1RECV_F0 1F0 1B0 1SEND_B0), relaxed,
// with a jit plan: kBegin, kAllocate{in}, kRun 1RECV_F0, kWait{rank 0 runs
// 0SEND_F0}, kAllocate{stash}, kRun 1F0, kRelease{in}, kAllocate{grad},
// kRun 1B0, kRelease{stash}, kRun 1SEND_B0 {grad}, kEnd, kDone.
//
// pc() counts the actions run: it is i while the cursor is at a_i's waits,
// allocation or run, and i + 1 from its release on. A wait holds in program
// order once pc() of the rank it names reaches its threshold.
//
// Thread-compatible; cheap to copy. Borrows the schedule, the positions and
// the memory events, which must outlive it.
#ifndef JITPIPE_SCHEDULER_EXECUTION_RANK_CURSOR_H_
#define JITPIPE_SCHEDULER_EXECUTION_RANK_CURSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/types/span.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/memory_events.h"
#include "scheduler/execution/wait_rules.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class Step : uint8_t { kBegin, kWait, kAllocate, kRun, kRelease, kEnd, kDone };

struct Instruction {
  Step step = Step::kBegin;
  int32_t index = -1;  // the action; -1 for kBegin, the program's length for kEnd, kDone
  Wait wait;           // kWait
  absl::Span<const int32_t> buffers;  // see the file comment
};

class RankCursor {
 public:
  // REQUIRES: `schedule` is lowered and `positions` = MatchSendRecv(schedule);
  // `memory` (may be null: no memory events) is the rank's.
  RankCursor(const Schedule& schedule, const CommPositions& positions, int rank, WaitModel model,
             const RankMemoryEvents* memory = nullptr)
      : program_(&schedule.ranks[rank]), positions_(&positions), memory_(memory), rank_(rank),
        model_(model), num_stages_(schedule.num_stages()),
        size_(static_cast<int32_t>(schedule.ranks[rank].size())) {
    if (memory_ != nullptr && memory_->Empty()) memory_ = nullptr;
    current_.buffers = memory_ != nullptr ? absl::MakeConstSpan(memory_->at_start)
                                          : absl::Span<const int32_t>();
  }

  const Instruction& current() const { return current_; }
  // The driver has carried out current() (for a kWait: the wait holds).
  // REQUIRES: !done().
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Advance() {
    const int32_t i = current_.index;
    switch (current_.step) {
      case Step::kBegin:
        EnterAction(0);
        return;
      case Step::kWait:
        if (++next_wait_ < waits_.count) {
          current_.wait = waits_.waits[next_wait_];
        } else {
          AfterWaits(i);
        }
        return;
      case Step::kAllocate:
        SetRun(i);
        return;
      case Step::kRun:
        AfterRun(i);
        return;
      case Step::kRelease:
        EnterAction(i + 1);
        return;
      case Step::kEnd:
        current_.step = Step::kDone;
        current_.buffers = {};
        return;
      case Step::kDone:
        return;
    }
  }

  // The program or the positions changed at or after the current action,
  // which has not run yet (a pass that edits a program while it replays
  // it): take the current action's waits again. REQUIRES: the cursor is at
  // a kWait.
  void Reenter() { EnterAction(current_.index); }

  int rank() const { return rank_; }
  WaitModel model() const { return model_; }
  int32_t pc() const { return pc_; }
  int32_t size() const { return size_; }
  bool done() const { return current_.step == Step::kDone; }
  // Whether every action has run (the cursor is at kEnd or kDone).
  bool finished() const { return pc_ == size(); }
  const RankProgram& program() const { return *program_; }
  // The action at `index` of this rank's program.
  const Action& action(int32_t index) const { return (*program_)[index]; }

  // "kWait before 3 (1F1): rank 0 runs 0SEND_F1 (index 5)", for tests and
  // debugging.
  std::string ToString(const Schedule& schedule) const;

 private:
  // The transitions write only the fields they change: these run once or
  // twice per action in every driver, the deadlock check's millions among
  // them.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void EnterAction(int32_t i) {
    current_.index = i;
    if (i == size()) {
      current_.step = Step::kEnd;
      current_.buffers = memory_ != nullptr ? absl::MakeConstSpan(memory_->at_end)
                                            : absl::Span<const int32_t>();
      return;
    }
    ActionWaits(*positions_, model_, rank_, i, (*program_)[i], last_unshard_, waits_);
    if (waits_.count > 0) {
      next_wait_ = 0;
      current_.step = Step::kWait;
      current_.wait = waits_.waits[0];
      return;
    }
    AfterWaits(i);
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void AfterWaits(int32_t i) {
    if (memory_ != nullptr) {
      absl::Span<const int32_t> ids = memory_->AllocatedBefore(i);
      if (!ids.empty()) {
        current_.step = Step::kAllocate;
        current_.buffers = ids;
        return;
      }
    }
    SetRun(i);
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void SetRun(int32_t i) {
    current_.step = Step::kRun;
    if (memory_ != nullptr) {
      current_.buffers = IsSend((*program_)[i].kind) ? memory_->ReleasedOnCompletion(i)
                                                     : absl::Span<const int32_t>();
    }
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void AfterRun(int32_t i) {
    ++pc_;
    const Action& a = (*program_)[i];
    if (a.kind == ActionKind::kUnshard) {
      if (last_unshard_.empty()) last_unshard_.assign(num_stages_, kAbsent);
      last_unshard_[a.stage] = i;
    }
    if (memory_ != nullptr) {
      absl::Span<const int32_t> ids = memory_->ReleasedAfter(i);
      if (!ids.empty()) {
        current_.step = Step::kRelease;
        current_.buffers = ids;
        return;
      }
    }
    EnterAction(i + 1);
  }

  static bool IsSend(ActionKind kind) {
    return kind == ActionKind::kSendF || kind == ActionKind::kSendB;
  }

  const RankProgram* program_;
  const CommPositions* positions_;
  const RankMemoryEvents* memory_;
  int rank_;
  WaitModel model_;
  int num_stages_;
  int32_t size_;  // the program's length
  Instruction current_;
  int32_t pc_ = 0;
  ActionWaitList waits_;
  int next_wait_ = 0;
  std::vector<int32_t> last_unshard_;  // by stage; empty until an UNSHARD ran
};

// One cursor per rank of `schedule`, in rank order; memory[r] (when given)
// is rank r's. REQUIRES: as RankCursor's; memory empty or of size pp.
std::vector<RankCursor> MakeCursors(const Schedule& schedule, const CommPositions& positions,
                                    WaitModel model,
                                    absl::Span<const RankMemoryEvents* const> memory = {});

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_RANK_CURSOR_H_
