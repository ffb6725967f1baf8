#include "scheduler/generators/zb_manual_order.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// Upstream's node types, in its id order (F, B, W); they index the tables.
enum Type : int { kF = 0, kB = 1, kW = 2 };

// One run of manual_order (zb.py). The arithmetic follows upstream's
// expressions operand for operand, so that double results (and so every
// comparison) are the ones Python computes.
class ManualOrder {
 public:
  ManualOrder(const ZbGraph& g, int pp, int m, const ZbFlags& flags)
      : g_(g), p_(pp), m_(m), flags_(flags), count_{}, e_(pp, 0.0), mem_(pp, 0),
        bubble_(pp, 0.0) {
    for (auto& c : count_) c.assign(pp, 0);
    for (auto& t : t_) t.assign(static_cast<size_t>(pp) * m, 0.0);
  }

  absl::Status Run() {
    RETURN_IF_ERROR(FirstMicrobatch());
    for (int i = 1; i < m_; ++i) RETURN_IF_ERROR(Microbatch(i));
    for (int j = 0; j < p_; ++j) {
      while (count_[kW][j] < m_) RETURN_IF_ERROR(Put(j, kW));
    }
    return absl::OkStatus();
  }

  ZbOrder Result() const {
    ZbOrder out{.flags = flags_, .best_time = 0, .skipped = 0, .stages = {}};
    for (int j = 0; j < p_; ++j) {
      out.best_time = std::max(out.best_time, T(kW, j, m_ - 1) - T(kF, j, 0) + g_.f[j]);
    }
    constexpr std::array<ActionKind, 3> kKinds = {
        ActionKind::kForward, ActionKind::kBackwardInput, ActionKind::kBackwardWeight};
    out.stages.resize(p_);
    for (int j = 0; j < p_; ++j) {
      // create_scheduled_nodes: (type, microbatch) order, stably sorted by end.
      std::vector<std::pair<int, int>> nodes;
      nodes.reserve(3 * static_cast<size_t>(m_));
      for (int type = 0; type < 3; ++type) {
        for (int mb = 0; mb < m_; ++mb) nodes.emplace_back(type, mb);
      }
      std::stable_sort(nodes.begin(), nodes.end(), [&](const auto& a, const auto& b) {
        return T(a.first, j, a.second) < T(b.first, j, b.second);
      });
      out.stages[j].reserve(nodes.size());
      for (const auto& [type, mb] : nodes) out.stages[j].push_back(Action::Make(kKinds[type], j, mb));
    }
    return out;
  }

 private:
  double& T(int type, int j, int mb) { return t_[type][static_cast<size_t>(j) * m_ + mb]; }
  double T(int type, int j, int mb) const { return t_[type][static_cast<size_t>(j) * m_ + mb]; }
  double Cost(int type, int j) const {
    return type == kF ? g_.f[j] : type == kB ? g_.b[j] : g_.w[j];
  }
  int64_t Mem(int type, int j) const {
    return type == kF ? g_.mem_f[j] : type == kB ? g_.mem_b[j] : g_.mem_w[j];
  }
  double MaxBubble() const {
    double max_bubble = 0;
    for (double b : bubble_) max_bubble = std::max(max_bubble, b);
    return max_bubble;
  }

  // put(): the next action of `type` on stage j, timed at once.
  absl::Status Put(int j, int type) {
    const int i = count_[type][j];
    if (i >= m_) {
      return absl::InternalError(absl::StrCat("zero-bubble heuristic: stage ", j,
                                              " has no microbatch left for ",
                                              std::string(1, "FBW"[type])));
    }
    const double cost = Cost(type, j);
    double tmp = e_[j] + cost;
    const double no_bubble = tmp;
    if (j > 0 && type == kF) tmp = std::max(tmp, T(kF, j - 1, i) + g_.forward_in[j] + cost);
    if (j < p_ - 1 && type == kB) tmp = std::max(tmp, T(kB, j + 1, i) + g_.backward_in[j] + cost);
    if (count_[kF][j] > 0) bubble_[j] += tmp - no_bubble;
    e_[j] = tmp;
    T(type, j, i) = tmp;
    mem_[j] += Mem(type, j);
    ++count_[type][j];
    return absl::OkStatus();
  }

  absl::Status MakeRoom(int j, int type) {
    while (mem_[j] + Mem(type, j) > g_.max_mem[j]) {
      if (count_[kW][j] >= count_[kB][j]) {
        return absl::ResourceExhaustedError(
            absl::StrCat("zero-bubble heuristic (", ZbFlagsName(flags_), "): stage ", j,
                         " cannot fit its memory cap of ", g_.max_mem[j]));
      }
      RETURN_IF_ERROR(Put(j, kW));
    }
    return absl::OkStatus();
  }

  // Pending W before an action whose input is ready at `ready`.
  absl::Status FillBefore(int j, double ready) {
    auto pending = [&] { return count_[kW][j] < count_[kB][j]; };
    while (pending() && e_[j] + Cost(kW, j) <= ready) RETURN_IF_ERROR(Put(j, kW));
    if (pending() && e_[j] < ready) {
      if (ready - e_[j] <= MaxBubble() - bubble_[j]) {
        if (flags_.no_bubble_greedy) RETURN_IF_ERROR(Put(j, kW));
      } else {
        RETURN_IF_ERROR(Put(j, kW));
      }
    }
    return absl::OkStatus();
  }

  absl::Status FirstMicrobatch() {
    for (int j = 0; j < p_; ++j) RETURN_IF_ERROR(Put(j, kF));
    std::vector<int> required(p_, 0);
    double last_t = 0;
    for (int j = p_ - 1; j >= 0; --j) {
      if (j == p_ - 1) {
        last_t = T(kF, j, 0) + Cost(kB, j);
        continue;
      }
      const double comm = g_.backward_in[j];
      int64_t mem = mem_[j];
      double cost = e_[j];
      while (count_[kF][j] + required[j] < m_ && mem + Mem(kF, j) <= g_.max_mem[j]) {
        if (flags_.allow_bubble_before_first_b) {
          if (cost + Cost(kF, j) > last_t + comm) break;
        } else {
          if (cost >= last_t + comm) break;
        }
        mem += Mem(kF, j);
        cost += Cost(kF, j);
        ++required[j];
      }
      last_t = std::max(cost, last_t + comm) + Cost(kB, j);
    }
    for (int j = 1; j < p_; ++j) {
      while (required[j] > 0 && required[j] >= required[j - 1] &&
             count_[kF][j] + required[j] < m_) {
        --required[j];
      }
    }
    for (int j = 0; j < p_; ++j) {
      for (int k = 0; k < required[j]; ++k) RETURN_IF_ERROR(Put(j, kF));
    }
    for (int j = p_ - 1; j >= 0; --j) RETURN_IF_ERROR(Put(j, kB));
    return absl::OkStatus();
  }

  // Whether stage j starts one more F in this round (before the later
  // stages' veto).
  bool WantsForward(int j) const {
    if (count_[kF][j] >= m_) return false;
    if (!(j + 1 < p_ && count_[kF][j] >= count_[kF][j + 1] + 2 && flags_.prioritize_b)) {
      return true;
    }
    const double next_plus_fw = e_[j + 1] + Cost(kF, j + 1) + Cost(kB, j + 1) + g_.backward_in[j];
    if (e_[j] >= next_plus_fw) return false;
    double w_cost = 0;
    int w_cnt = 0;
    int64_t mem_with_w = mem_[j] + Mem(kF, j);
    while (mem_with_w > g_.max_mem[j] && count_[kW][j] + w_cnt < count_[kB][j]) {
      w_cost += Cost(kW, j);
      mem_with_w += Mem(kW, j);
      ++w_cnt;
    }
    if (e_[j] + Cost(kF, j) + w_cost <= next_plus_fw) return true;
    w_cost = 0;  // upstream resets it before its slack test
    return !(next_plus_fw - (e_[j] + w_cost) <= MaxBubble() - bubble_[j]);
  }

  absl::Status Microbatch(int i) {
    std::vector<int> required(p_, 0);
    for (int j = 0; j < p_; ++j) required[j] = WantsForward(j) ? 1 : 0;
    for (int j = p_ - 2; j >= 0; --j) required[j] = std::min(required[j], required[j + 1]);
    for (int j = 0; j < p_; ++j) {
      if (required[j] == 0) continue;
      RETURN_IF_ERROR(MakeRoom(j, kF));
      if (j > 0) RETURN_IF_ERROR(FillBefore(j, T(kF, j - 1, count_[kF][j]) + g_.forward_in[j]));
      RETURN_IF_ERROR(Put(j, kF));
    }
    for (int j = p_ - 1; j >= 0; --j) {
      RETURN_IF_ERROR(MakeRoom(j, kB));
      if (j + 1 < p_) RETURN_IF_ERROR(FillBefore(j, T(kB, j + 1, i) + g_.backward_in[j]));
      if (j == 0 && count_[kF][j] == m_) {
        while (count_[kW][j] < count_[kB][j]) RETURN_IF_ERROR(Put(j, kW));
      }
      RETURN_IF_ERROR(Put(j, kB));
    }
    return absl::OkStatus();
  }

  const ZbGraph& g_;
  const int p_, m_;
  const ZbFlags flags_;
  std::array<std::vector<int>, 3> count_;   // [type][stage]: placed so far
  std::array<std::vector<double>, 3> t_;    // [type][stage * m + mb]: end time (0: not yet)
  std::vector<double> e_;                   // [stage]: end of its last action
  std::vector<int64_t> mem_;                // [stage]: memory held
  std::vector<double> bubble_;              // [stage]: idle time after its first F
};

absl::Status CheckGraph(const ZbGraph& g, int pp, int microbatches) {
  if (pp < 1 || microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zero-bubble heuristic: pp and microbatches must be >= 1, got ", pp, ", ", microbatches));
  }
  const size_t n = static_cast<size_t>(pp);
  for (const auto* v : {&g.f, &g.b, &g.w, &g.forward_in, &g.backward_in}) {
    if (v->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zero-bubble heuristic: a cost table has ", v->size(), " stages; pp is ", pp));
    }
  }
  for (const auto* v : {&g.mem_f, &g.mem_b, &g.mem_w, &g.max_mem}) {
    if (v->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zero-bubble heuristic: a memory table has ", v->size(), " stages; pp is ", pp));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ZbFlagsName(const ZbFlags& flags) {
  return absl::StrCat(flags.prioritize_b ? "B prioritised" : "F prioritised", ", ",
                      flags.no_bubble_greedy ? "W fills every bubble" : "W only where it fits",
                      ", ",
                      flags.allow_bubble_before_first_b ? "a bubble allowed before the first B"
                                                        : "no bubble before the first B");
}

absl::StatusOr<ZbOrder> ZbManualOrder(const ZbGraph& graph, int pp, int microbatches,
                                      const ZbFlags& flags) {
  RETURN_IF_ERROR(CheckGraph(graph, pp, microbatches));
  ManualOrder run(graph, pp, microbatches, flags);
  RETURN_IF_ERROR(run.Run());
  return run.Result();
}

absl::StatusOr<ZbOrder> ZbInitialSolution(const ZbGraph& graph, int pp, int microbatches) {
  RETURN_IF_ERROR(CheckGraph(graph, pp, microbatches));
  std::optional<ZbOrder> best;
  absl::Status last_failure;
  int skipped = 0;
  for (bool allow : {true, false}) {
    for (bool prioritize : {true, false}) {
      for (bool greedy : {true, false}) {
        absl::StatusOr<ZbOrder> run = ZbManualOrder(
            graph, pp, microbatches,
            ZbFlags{.allow_bubble_before_first_b = allow, .prioritize_b = prioritize,
                    .no_bubble_greedy = greedy});
        if (!run.ok()) {
          if (run.status().code() != absl::StatusCode::kResourceExhausted) return run.status();
          last_failure = run.status();
          ++skipped;
          continue;
        }
        if (!best.has_value() || run->best_time < best->best_time) best = *std::move(run);
      }
    }
  }
  if (!best.has_value()) return last_failure;
  best->skipped = skipped;
  return *std::move(best);
}

ZbGraph UniformZbGraph(int pp, double f, double b, double w, double comm, int64_t max_mem) {
  const size_t n = static_cast<size_t>(std::max(pp, 0));
  return ZbGraph{.f = std::vector<double>(n, f), .b = std::vector<double>(n, b),
                 .w = std::vector<double>(n, w), .forward_in = std::vector<double>(n, comm),
                 .backward_in = std::vector<double>(n, comm),
                 .mem_f = std::vector<int64_t>(n, 1), .mem_b = std::vector<int64_t>(n, 0),
                 .mem_w = std::vector<int64_t>(n, -1),
                 .max_mem = std::vector<int64_t>(n, max_mem)};
}

}  // namespace jitpipe
