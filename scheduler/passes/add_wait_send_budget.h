// AddWaitSendBudget: PyTorch main's _add_wait_send_budget (torchtitan's
// max_outstanding_sends). Bounds how many sent buffers a rank holds at once
// -- sends posted and not yet waited for, in either direction -- to a budget
// K, by inserting WAIT_SEND_F / WAIT_SEND_B actions, so that the memory they
// occupy is about K stage boundaries.
//
// A wait for a send is safe from the moment the peer has posted the
// matching receive: the transfer then needs nothing further from either
// side. The pass walks the lowered program in causal order -- the ranks'
// cursors (rank_cursor.h) run as far as their waits allow, as the deadlock
// check runs them -- and when a rank is about to post a send while holding
// K, it waits for the oldest send it holds whose receive the walk has
// already passed: that WAIT goes right before the send. If none has, the
// rank stops there until a peer posts one of those receives. Every wait
// added sits after its receive in the walk, so no edge runs backwards
// through the walk's order: a program deadlock-free under `model` stays so.
// WAIT_SENDs already in the program (e.g. from add_wait_send) release their
// sends too; one whose send the budget made the rank wait for earlier is
// dropped (its buffer is already free).
//
// Before (rank 0 of GPipe pp 2, m 3, K = 2; rank 1 posts each RECV_F just
// before its F):
//   0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 ...
// After:
//   0F0 0SEND_F0 0F1 0SEND_F1 0F2 0WAIT_SEND_F0 0SEND_F2 0RECV_B0 0B0 ...
//
// Does nothing to a rank that never holds more than K sends. Placements
// differ in what they allow: with receives posted early (early,
// jit-rendezvous) every budget from 1 can be kept on the built-in
// schedules; just-in-time receives are posted so late that on several
// schedules a sender can only wait for one of its last sends once it has
// posted more.
#ifndef JITPIPE_SCHEDULER_PASSES_ADD_WAIT_SEND_BUDGET_H_
#define JITPIPE_SCHEDULER_PASSES_ADD_WAIT_SEND_BUDGET_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/execution/wait_rules.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kAddWaitSendBudgetPass = "add_wait_send_budget";

struct SendBudgetOptions {
  int budget = 1;  // K: sent buffers a rank may hold, >= 1
  // The semantics the walk runs the program under (and that the result is
  // deadlock-free under): relaxed for tag-matched transports, strict for a
  // program lowered for rendezvous transports.
  WaitModel model = WaitModel::kRelaxed;
};

// Returns the schedule with the waits added.
// Errors: FailedPrecondition for a compute-only schedule; InvalidArgument
// for a budget below 1, from Validate() (the program must match and be
// deadlock-free under options.model), or when the budget cannot be kept
// without a wait that could hang, naming the rank, index and send and the
// smallest budget the walk can keep, e.g.
//   send budget 1 cannot be kept: rank 0, index 4 (0SEND_F2) would hold 2
//   sent buffers, and rank 1 posts none of their receives (1RECV_F0 at
//   index 3, ...) before rank 0 goes on; budget 2 can be kept
absl::StatusOr<Schedule> AddWaitSendBudget(const Schedule& in, const SendBudgetOptions& options);

// The smallest budget >= options.budget that AddWaitSendBudget keeps on
// `in` (a budget of the most sends a rank posts always is). Errors: those
// of AddWaitSendBudget but the budget's.
absl::StatusOr<int> SmallestSendBudget(const Schedule& in, const SendBudgetOptions& options);

// SmallestSendBudget and AddWaitSendBudget at that budget in one call: the
// input is validated and indexed once, and a budget kept at the first try
// is walked once. Errors: as SmallestSendBudget.
struct BudgetedProgram {
  int budget = 0;
  Schedule program;
};
absl::StatusOr<BudgetedProgram> AddWaitSendAtSmallestBudget(const Schedule& in,
                                                            const SendBudgetOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_ADD_WAIT_SEND_BUDGET_H_
