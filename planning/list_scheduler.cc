#include "planning/list_scheduler.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// The clock-driven builder. Index spaces: stage s, microbatch j, rank r;
// per rank its local stages in ascending order.
class Builder {
 public:
  Builder(const ListScheduleParams& p, const StageTimes& t)
      : p_(p),
        t_(t),
        stages_(p.pp * p.stages_per_rank),
        stage_to_rank_(StageToRank(p.placement, p.pp, p.stages_per_rank)),
        rank_stages_(RankToStages(stage_to_rank_, p.pp)),
        next_f_(stages_, 0),
        next_i_(stages_, 0),
        f_end_(stages_, std::vector<double>(p.microbatches, kNever)),
        i_end_(stages_, std::vector<double>(p.microbatches, kNever)),
        busy_until_(p.pp, 0),
        live_(p.pp, 0),
        in_flight_(p.pp, 0),
        warmup_forwards_(p.pp, 0),
        had_backward_(p.pp, false),
        pending_w_(p.pp),
        programs_(p.pp),
        remaining_(int64_t{stages_} * p.microbatches * (p.split_backward ? 3 : 2)) {
    for (int r = 0; r < p.pp; ++r) {
      warmup_depth_.push_back(stages_ - rank_stages_[r].front());
    }
  }

  absl::StatusOr<Schedule> Run() {
    double now = 0;
    while (remaining_ > 0) {
      bool progress = true;
      while (progress) {
        progress = false;
        for (int r = 0; r < p_.pp; ++r) {
          if (busy_until_[r] <= now && Decide(r, now)) progress = true;
        }
      }
      if (remaining_ == 0) break;
      const double next = NextTime(now);
      if (next == kNever) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the memory cap or in-flight limit leaves no rank able to go on at time ", now));
      }
      now = next;
    }
    Schedule s;
    s.name = p_.name;
    s.pp = p_.pp;
    s.stages_per_rank = p_.stages_per_rank;
    s.microbatches = p_.microbatches;
    s.placement = p_.placement;
    s.stage_to_rank = stage_to_rank_;
    s.ranks = std::move(programs_);
    return s;
  }

 private:
  double Transfer(int from, int to, const std::vector<double>& cost, int stage) const {
    return stage_to_rank_[from] == stage_to_rank_[to] ? 0 : cost[stage];
  }

  // When F(s, next_f_[s]) may start (kNever: its input is not scheduled).
  double ReadyF(int s) const {
    const int j = next_f_[s];
    if (j >= p_.microbatches) return kNever;
    if (s == 0) return 0;
    return f_end_[s - 1][j] + Transfer(s - 1, s, t_.send_forward_us, s - 1);
  }

  double ReadyI(int s) const {
    const int j = next_i_[s];
    if (j >= next_f_[s]) return kNever;
    if (s == stages_ - 1) return f_end_[s][j];
    return std::max(f_end_[s][j],
                    i_end_[s + 1][j] + Transfer(s + 1, s, t_.send_backward_us, s + 1));
  }

  // An F on stage s keeps room for one microbatch of each later stage on
  // the rank (the V's second chunk): filled with early stages, a rank could
  // never take the microbatches that would free them.
  bool MemoryAllows(int r, int s) const {
    int64_t reserve = 0;
    int later = 0;
    for (int other : rank_stages_[r]) {
      if (other <= s || !p_.reserve_for_later_stages) continue;
      reserve += t_.activation_bytes[other];
      ++later;
    }
    if (in_flight_[r] + 1 + later > p_.max_in_flight) return false;
    return p_.cap_bytes.empty() || live_[r] + t_.activation_bytes[s] + reserve <= p_.cap_bytes[r];
  }

  bool WarmupAllows(int r) const {
    return !p_.warmup_limit || had_backward_[r] || warmup_forwards_[r] < warmup_depth_[r];
  }

  // The preferred of two stages by depth_first.
  bool Before(int a, int b) const { return p_.depth_first ? a > b : a < b; }

  void Commit(int r, const Action& a, double start, double duration) {
    programs_[r].push_back(a);
    busy_until_[r] = start + duration;
    --remaining_;
  }

  void DoForward(int r, int s, double now) {
    const int j = next_f_[s]++;
    f_end_[s][j] = now + t_.forward_us[s];
    live_[r] += t_.activation_bytes[s];
    ++in_flight_[r];
    if (!had_backward_[r]) ++warmup_forwards_[r];
    Commit(r, Action::Make(ActionKind::kForward, s, j), now, t_.forward_us[s]);
  }

  void DoBackward(int r, int s, double now) {
    const int j = next_i_[s]++;
    had_backward_[r] = true;
    if (p_.split_backward) {
      i_end_[s][j] = now + t_.backward_input_us[s];
      pending_w_[r].push_back({s, j});
      Commit(r, Action::Make(ActionKind::kBackwardInput, s, j), now, t_.backward_input_us[s]);
      return;
    }
    const double duration = t_.backward_input_us[s] + t_.backward_weight_us[s];
    i_end_[s][j] = now + duration;  // a full B sends its input gradient at its end
    Release(r, s);
    Commit(r, Action::Make(ActionKind::kBackward, s, j), now, duration);
  }

  void DoWeight(int r, double now) {
    const auto [s, j] = pending_w_[r].front();
    pending_w_[r].pop_front();
    Release(r, s);
    Commit(r, Action::Make(ActionKind::kBackwardWeight, s, j), now, t_.backward_weight_us[s]);
  }

  void Release(int r, int s) {
    live_[r] -= t_.activation_bytes[s];
    --in_flight_[r];
  }

  // Picks and commits rank r's action at `now`, if any.
  bool Decide(int r, double now) {
    int best_f = -1, best_i = -1;
    bool f_blocked = false;  // an F is ready but memory keeps it back
    bool f_or_i_left = false;
    for (int s : rank_stages_[r]) {
      if (next_f_[s] < p_.microbatches || next_i_[s] < p_.microbatches) f_or_i_left = true;
      if (ReadyF(s) <= now) {
        if (!MemoryAllows(r, s)) {
          f_blocked = true;
        } else if (WarmupAllows(r) && (best_f < 0 || Before(s, best_f))) {
          best_f = s;
        }
      }
      if (ReadyI(s) <= now && (best_i < 0 || Before(s, best_i))) best_i = s;
    }
    if (p_.feed_idle_first && best_f >= 0 && best_i >= 0) {
      const double f_wait = ConsumerFree(best_f, best_f + 1);
      const double i_wait = ConsumerFree(best_i, best_i - 1);
      if (f_wait < i_wait) {
        DoForward(r, best_f, now);
        return true;
      }
      if (i_wait < f_wait) {
        DoBackward(r, best_i, now);
        return true;
      }
    }
    const int first = p_.prefer_backward ? best_i : best_f;
    const int second = p_.prefer_backward ? best_f : best_i;
    if (first >= 0 || second >= 0) {
      const bool backward = p_.prefer_backward ? first >= 0 : first < 0;
      const int s = first >= 0 ? first : second;
      backward ? DoBackward(r, s, now) : DoForward(r, s, now);
      return true;
    }
    if (pending_w_[r].empty()) return false;
    if (f_blocked || !f_or_i_left || p_.fill == FillWithW::kGreedy) {
      DoWeight(r, now);
      return true;
    }
    if (p_.fill == FillWithW::kWhenItFits) {
      const int s = pending_w_[r].front().first;
      if (now + t_.backward_weight_us[s] <= NextReady(r)) {
        DoWeight(r, now);
        return true;
      }
    }
    return false;
  }

  // When the rank of stage `to` (fed by stage `from`) frees up; never when
  // `to` is outside the chain or on the same rank.
  // It frees up at busy_until, then runs the work already ready for it.
  double ConsumerFree(int from, int to) const {
    if (to < 0 || to >= stages_ || stage_to_rank_[to] == stage_to_rank_[from]) return kNever;
    const int q = stage_to_rank_[to];
    double free = busy_until_[q];
    for (int s : rank_stages_[q]) {
      if (ReadyF(s) <= free && MemoryAllows(q, s) && WarmupAllows(q)) free += t_.forward_us[s];
      if (ReadyI(s) <= free) free += t_.backward_input_us[s];
    }
    return free;
  }

  // The earliest time one of rank r's F or I becomes ready (kNever: none
  // known yet).
  double NextReady(int r) const {
    double next = kNever;
    for (int s : rank_stages_[r]) {
      if (MemoryAllows(r, s) && WarmupAllows(r)) next = std::min(next, ReadyF(s));
      next = std::min(next, ReadyI(s));
    }
    return next;
  }

  double NextTime(double now) const {
    double next = kNever;
    for (int r = 0; r < p_.pp; ++r) {
      if (busy_until_[r] > now) {
        next = std::min(next, busy_until_[r]);
        continue;
      }
      for (int s : rank_stages_[r]) {
        for (double t : {ReadyF(s), ReadyI(s)}) {
          if (t > now) next = std::min(next, t);
        }
      }
      // A rank holding Ws for later (kNever / kWhenItFits) decides again at
      // its next ready time, found above.
    }
    return next;
  }

  const ListScheduleParams& p_;
  const StageTimes& t_;
  const int stages_;
  const std::vector<int> stage_to_rank_;
  const std::vector<std::vector<int>> rank_stages_;
  std::vector<int> warmup_depth_;
  std::vector<int> next_f_, next_i_;
  std::vector<std::vector<double>> f_end_, i_end_;
  std::vector<double> busy_until_;
  std::vector<int64_t> live_;
  std::vector<int> in_flight_;
  std::vector<int> warmup_forwards_;
  std::vector<bool> had_backward_;
  std::vector<std::deque<std::pair<int, int>>> pending_w_;
  std::vector<RankProgram> programs_;
  int64_t remaining_;
};

}  // namespace

StageTimes StageTimesOf(const Model& model, const std::vector<int>& stage_to_rank) {
  const int stages = static_cast<int>(stage_to_rank.size());
  StageTimes t;
  for (int s = 0; s < stages; ++s) {
    const StageCost c = model.ForStage(s);
    t.forward_us.push_back(c.forward_us);
    t.backward_input_us.push_back(c.backward_input_us);
    t.backward_weight_us.push_back(c.backward_weight_us);
    t.activation_bytes.push_back(c.stash_bytes + c.input_bytes);
    t.send_forward_us.push_back(model.p2p.TransferUs(static_cast<double>(c.output_bytes)));
    t.send_backward_us.push_back(model.p2p.TransferUs(static_cast<double>(c.input_bytes)));
  }
  return t;
}

absl::StatusOr<Schedule> BuildListSchedule(const ListScheduleParams& params,
                                           const StageTimes& times) {
  if (params.pp < 1 || params.microbatches < 1 || params.stages_per_rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pp, microbatches and stages per rank must be >= 1, got ", params.pp, ", ",
        params.microbatches, ", ", params.stages_per_rank));
  }
  if (params.placement == Placement::kCustom ||
      (params.placement == Placement::kV && params.stages_per_rank != 2)) {
    return absl::InvalidArgumentError("the list scheduler places stages in a loop, or in a V "
                                      "with 2 stages per rank");
  }
  const size_t stages = static_cast<size_t>(params.pp) * params.stages_per_rank;
  for (const auto* v : {&times.forward_us, &times.backward_input_us, &times.backward_weight_us,
                        &times.send_forward_us, &times.send_backward_us}) {
    if (v->size() != stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage times for ", v->size(), " stages; the placement has ", stages));
    }
  }
  if (times.activation_bytes.size() != stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "activation bytes for ", times.activation_bytes.size(), " stages; expected ", stages));
  }
  if (!params.cap_bytes.empty() && static_cast<int>(params.cap_bytes.size()) != params.pp) {
    return absl::InvalidArgumentError(
        absl::StrCat("cap_bytes has ", params.cap_bytes.size(), " ranks; pp is ", params.pp));
  }
  return Builder(params, times).Run();
}

}  // namespace jitpipe
