#include "scheduler/passes/add_wait_send_budget.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/rank_cursor.h"
#include "scheduler/analysis/pass_utils.h"
#include "scheduler/analysis/validate.h"

namespace jitpipe {
namespace {

// A send a rank holds: its index in the input program and where its
// receive is.
struct Held {
  int32_t send = 0;
  Endpoint recv;
};

// Where the walk stopped a rank for the budget: the send it could not post.
struct BudgetStop {
  int rank = -1;
  int32_t index = -1;
};

// One causal walk of the program under a budget (see the header). Index
// spaces: rank; program index of the input; of the output (built as the
// walk goes).
class BudgetWalk {
 public:
  // Which walks write the output program: a search's walks only decide
  // (at pp 128 an output is 85 MB of fresh pages and as many bytes written).
  enum class Output { kWrite, kNone };

  // `out`: programs whose storage the walk writes its output into (cleared
  // first; their capacity is kept), so that a later walk reuses pages an
  // earlier one touched.
  BudgetWalk(const Schedule& s, const CommPositions& positions, WaitModel model, int budget,
             Output output = Output::kWrite, std::vector<RankProgram> out = {})
      : s_(s), pos_(positions), budget_(budget), write_(output == Output::kWrite),
        cursors_(MakeCursors(s, positions, model)), held_(s.pp), waited_early_(s.pp),
        out_(std::move(out)), parked_(s.pp) {
    if (!write_) return;
    out_.resize(s.pp);
    for (int r = 0; r < s.pp; ++r) {
      // The input, and at most one WAIT_SEND per send: never reallocated.
      const RankProgram& program = s.ranks[r];
      out_[r].clear();
      out_[r].reserve(program.size() + std::count_if(program.begin(), program.end(),
                                                     [](const Action& a) { return IsSend(a.kind); }));
    }
  }

  // Whether every rank ran to its end; otherwise stop() names a rank the
  // budget stopped (there is one: the input alone is deadlock-free).
  bool Run() {
    std::vector<int> ready;
    for (int r = s_.pp - 1; r >= 0; --r) ready.push_back(r);
    std::vector<bool> queued(s_.pp, true);
    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      queued[r] = false;
      const int32_t before = cursors_[r].pc();
      Advance(r);
      if (cursors_[r].pc() == before) continue;
      // Every rank parked on r looks again (its condition may hold now).
      // The list is swapped out, not moved: both buffers are reused, so a
      // wake-up allocates nothing (there is about one per wait).
      woken_.swap(parked_[r]);
      for (int q : woken_) {
        if (!queued[q] && !cursors_[q].done()) {
          queued[q] = true;
          ready.push_back(q);
        }
      }
      woken_.clear();
    }
    for (const RankCursor& c : cursors_) {
      if (!c.done()) return false;
    }
    return true;
  }

  std::vector<RankProgram> TakePrograms() { return std::move(out_); }
  const BudgetStop& stop() const { return stop_; }
  const std::deque<Held>& held(int r) const { return held_[r]; }

 private:
  // Runs rank r as far as its waits and the budget allow; parks it on the
  // rank(s) it waits for.
  void Advance(int r) {
    RankCursor& c = cursors_[r];
    while (!c.done()) {
      const Instruction& in = c.current();
      if (in.step == Step::kWait && cursors_[in.wait.rank].pc() < in.wait.threshold) {
        parked_[in.wait.rank].push_back(r);
        return;
      }
      if (in.step == Step::kRun && !Run(r, in.index)) return;
      c.Advance();
    }
  }

  // Runs action i of rank r into its output; false (and r parked) when it is
  // a send the budget does not let through yet.
  bool Run(int r, int32_t i) {
    const Action& a = s_.ranks[r][i];
    std::deque<Held>& held = held_[r];
    if (IsSend(a.kind)) {
      while (static_cast<int>(held.size()) >= budget_) {
        auto done = std::find_if(held.begin(), held.end(), [&](const Held& h) {
          return cursors_[h.recv.rank].pc() > h.recv.index;
        });
        if (done == held.end()) {
          stop_ = {r, i};
          for (const Held& h : held) parked_[h.recv.rank].push_back(r);
          return false;
        }
        const Action& sent = s_.ranks[r][done->send];
        const ActionKind wait =
            sent.kind == ActionKind::kSendF ? ActionKind::kWaitSendF : ActionKind::kWaitSendB;
        if (write_) out_[r].push_back(Action::Make(wait, sent.stage, sent.microbatch));
        waited_early_[r].push_back(done->send);
        held.erase(done);
      }
      held.push_back({i, Partner(pos_, a)});
    } else if (IsWaitSend(a.kind)) {
      const int32_t send = WaitedSend(pos_, a);
      std::vector<int32_t>& early = waited_early_[r];
      if (std::find(early.begin(), early.end(), send) != early.end()) {
        return true;  // the budget waited for this send earlier: the later wait goes
      }
      held.erase(std::remove_if(held.begin(), held.end(),
                                [&](const Held& h) { return h.send == send; }),
                 held.end());
    }
    if (write_) out_[r].push_back(a);
    return true;
  }

  const Schedule& s_;
  const CommPositions& pos_;
  const int budget_;
  const bool write_;
  std::vector<RankCursor> cursors_;
  std::vector<std::deque<Held>> held_;  // per rank, oldest first
  // Per rank: sends the budget waited for although a WAIT_SEND of theirs
  // comes later in the input (that one is dropped).
  std::vector<std::vector<int32_t>> waited_early_;
  std::vector<RankProgram> out_;
  std::vector<std::vector<int>> parked_;  // ranks parked on each rank
  std::vector<int> woken_;                // Run()'s scratch: the ranks a rank wakes
  BudgetStop stop_;
};

// Whether the walk keeps `budget`. With `out`, the walk writes its output
// there (reusing the storage it holds); without, it only decides.
bool Keeps(const Schedule& s, const CommPositions& positions, WaitModel model, int budget,
           std::vector<RankProgram>* out = nullptr) {
  if (out == nullptr) {
    return BudgetWalk(s, positions, model, budget, BudgetWalk::Output::kNone).Run();
  }
  BudgetWalk walk(s, positions, model, budget, BudgetWalk::Output::kWrite, std::move(*out));
  const bool kept = walk.Run();
  *out = walk.TakePrograms();
  return kept;
}

// The smallest budget above `failed` that the walk keeps: a budget of the
// most sends any rank posts always works (no wait is ever needed). Budgets
// kept form an upward-closed range, so a galloping search from `failed`
// (+1, +2, +4, ...) brackets the answer and a binary search finds it: about
// 2 log2(answer - failed) walks where a bisection of [failed, most] took
// log2(most) (13 at pp 128 m 1024, whose ranks post 8,192 sends; the
// answer is a few). The walks only decide.
int SmallestBudget(const Schedule& s, const CommPositions& positions, WaitModel model,
                   int failed) {
  int most = 1;
  for (const RankProgram& program : s.ranks) {
    most = std::max<int>(
        most, static_cast<int>(std::count_if(program.begin(), program.end(),
                                             [](const Action& a) { return IsSend(a.kind); })));
  }
  int lo = failed, hi = std::max(most, failed + 1);  // lo fails, hi keeps
  for (int step = 1; lo + step < hi; step *= 2) {
    if (Keeps(s, positions, model, lo + step)) {
      hi = lo + step;
      break;
    }
    lo += step;
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (Keeps(s, positions, model, mid) ? hi : lo) = mid;
  }
  return hi;
}

absl::Status BudgetError(const Schedule& s, const CommPositions& positions, WaitModel model,
                         int budget, const BudgetWalk& walk) {
  const BudgetStop& stop = walk.stop();
  std::vector<std::string> receives;
  for (const Held& h : walk.held(stop.rank)) {
    receives.push_back(absl::StrCat(s.ranks[h.recv.rank][h.recv.index].ToString(), ": rank ",
                                    h.recv.rank, ", index ", h.recv.index));
  }
  const int smallest = SmallestBudget(s, positions, model, budget);
  return absl::InvalidArgumentError(absl::StrCat(
      "send budget ", budget, " cannot be kept: ",
      Where(stop.rank, stop.index, s.ranks[stop.rank][stop.index]), " would hold ", budget + 1,
      " sent buffers, and none of the receives of those it holds (",
      absl::StrJoin(receives, "; "), ") is posted before it goes on; budget ", smallest,
      " can be kept"));
}

// The checks both entry points make; the positions of a valid `in`.
absl::StatusOr<CommPositions> CheckBudgetInput(const Schedule& in,
                                               const SendBudgetOptions& options) {
  if (options.budget < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the send budget must be at least 1 (a send must be posted), not ",
                     options.budget));
  }
  if (options.model == WaitModel::kBlockingRecv) {
    return absl::InvalidArgumentError(
        "the send budget walks relaxed or strict semantics, not blocking-receive ones");
  }
  if (!in.lowered) {
    return absl::FailedPreconditionError(
        "add_wait_send_budget needs a lowered program (its sends placed); this one is "
        "compute-only");
  }
  return ValidateLowered(in, {.semantics = options.model == WaitModel::kStrict
                                               ? CommSemantics::kStrict
                                               : CommSemantics::kRelaxed,
                              .grid_rows = 0});
}

}  // namespace

absl::StatusOr<Schedule> AddWaitSendBudget(const Schedule& in, const SendBudgetOptions& options) {
  ASSIGN_OR_RETURN(const CommPositions positions, CheckBudgetInput(in, options));
  BudgetWalk walk(in, positions, options.model, options.budget);
  if (!walk.Run()) return BudgetError(in, positions, options.model, options.budget, walk);
  return WithPrograms(in, walk.TakePrograms(), /*lowered=*/true);
}

absl::StatusOr<int> SmallestSendBudget(const Schedule& in, const SendBudgetOptions& options) {
  ASSIGN_OR_RETURN(const CommPositions positions, CheckBudgetInput(in, options));
  if (Keeps(in, positions, options.model, options.budget)) return options.budget;
  return SmallestBudget(in, positions, options.model, options.budget);
}

absl::StatusOr<BudgetedProgram> AddWaitSendAtSmallestBudget(const Schedule& in,
                                                            const SendBudgetOptions& options) {
  ASSIGN_OR_RETURN(const CommPositions positions, CheckBudgetInput(in, options));
  BudgetedProgram out;
  out.budget = options.budget;
  // The budget asked for usually holds: its walk writes the output. Else the
  // search decides the smallest that holds, and one more walk writes its
  // output into the storage the first one touched.
  std::vector<RankProgram> programs;
  if (!Keeps(in, positions, options.model, out.budget, &programs)) {
    out.budget = SmallestBudget(in, positions, options.model, options.budget);
    if (!Keeps(in, positions, options.model, out.budget, &programs)) {
      return absl::InternalError(absl::StrCat("send budget ", out.budget,
                                              " was found to be kept, and then was not"));
    }
  }
  out.program = WithPrograms(in, std::move(programs), /*lowered=*/true);
  return out;
}

}  // namespace jitpipe
