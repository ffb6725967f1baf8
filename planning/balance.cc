#include "planning/balance.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Beyond this many (stages x layers²) steps the min-max start is skipped.
constexpr double kMaxDpSteps = 5e7;

class Evaluator {
 public:
  Evaluator(const LayeredModel& model, const Schedule& schedule, const BalanceOptions& options)
      : model_(model), schedule_(schedule), options_(options), start_(absl::Now()) {}

  absl::StatusOr<double> Makespan(const Partition& p) {
    ++evaluations_;
    return Simulate(p);
  }
  // Safe to call from several threads at once; counts nothing (Count does).
  absl::StatusOr<double> Simulate(const Partition& p) const {
    ASSIGN_OR_RETURN(Model staged, StageModel(model_, p, schedule_.chains));
    ASSIGN_OR_RETURN(Prediction prediction, Predict(schedule_, staged, options_.predict));
    return prediction.simulation.makespan_us;
  }
  void Count(int n) { evaluations_ += n; }
  int Remaining() const { return std::max(0, options_.max_evaluations - evaluations_); }

  bool Exhausted() {
    if (evaluations_ >= options_.max_evaluations) return true;
    if (absl::Now() - start_ >= options_.time_budget) budget_ended_ = true;
    return budget_ended_;
  }
  bool budget_ended() const { return budget_ended_; }
  int evaluations() const { return evaluations_; }

 private:
  const LayeredModel& model_;
  const Schedule& schedule_;
  const BalanceOptions& options_;
  const absl::Time start_;
  int evaluations_ = 0;
  bool budget_ended_ = false;
};

// The contiguous cut into `stages` stages with the smallest largest stage
// compute; stage 0 holds the embedding and the last stage the loss.
// dp[k][i]: the best bottleneck of layers [0, i) in k stages.
std::optional<Partition> MinMaxPartition(const LayeredModel& model, int stages) {
  const int n = static_cast<int>(model.layers.size());
  if (static_cast<double>(stages) * n * n > kMaxDpSteps) return std::nullopt;
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const LayerCost& l = model.layers[i];
    prefix[i + 1] = prefix[i] + l.forward_us + l.backward_input_us + l.backward_weight_us;
  }
  const int first_min_end = model.HasEmbedding() ? 1 : 0;
  const int last_max_begin = model.HasLoss() ? n - 1 : n;
  std::vector<std::vector<double>> dp(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  dp[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (int i = 0; i <= n; ++i) {
      if (k == 1 && i < first_min_end) continue;
      for (int j = 0; j <= i; ++j) {
        if (dp[k - 1][j] == kInf) continue;
        if (k == stages && j > last_max_begin) continue;
        const double v = std::max(dp[k - 1][j], prefix[i] - prefix[j]);
        if (v < dp[k][i]) {
          dp[k][i] = v;
          cut[k][i] = j;
        }
      }
    }
  }
  if (dp[stages][n] == kInf) return std::nullopt;
  Partition p;
  p.boundaries.assign(stages + 1, 0);
  p.boundaries[stages] = n;
  for (int k = stages, i = n; k > 0; --k) {
    i = cut[k][i];
    p.boundaries[k - 1] = i;
  }
  return p;
}

// The neighbours of `p`: each inner boundary moved by one layer, keeping the
// embedding on stage 0 and the loss on the last stage.
std::vector<Partition> Neighbours(const Partition& p, const LayeredModel& model) {
  const int n = static_cast<int>(model.layers.size());
  const int s = p.num_stages();
  std::vector<Partition> out;
  for (int k = 1; k < s; ++k) {
    for (int delta : {-1, +1}) {
      Partition q = p;
      q.boundaries[k] += delta;
      if (q.boundaries[k] < q.boundaries[k - 1] || q.boundaries[k] > q.boundaries[k + 1]) continue;
      if (k == 1 && model.HasEmbedding() && q.boundaries[1] < 1) continue;
      if (k == s - 1 && model.HasLoss() && q.boundaries[k] > n - 1) continue;
      out.push_back(std::move(q));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<BalancedPartition> BalancePartition(const LayeredModel& model,
                                                   const Schedule& schedule,
                                                   const BalanceOptions& options) {
  if (options.max_evaluations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_evaluations must be >= 1, got ", options.max_evaluations));
  }
  const int stages = schedule.stages_per_chain();
  Evaluator eval(model, schedule, options);
  BalancedPartition out;
  ASSIGN_OR_RETURN(out.partition, EvenPartition(model, stages));
  ASSIGN_OR_RETURN(out.makespan_us, eval.Makespan(out.partition));
  out.even_makespan_us = out.makespan_us;
  if (std::optional<Partition> minmax = MinMaxPartition(model, stages);
      minmax.has_value() && *minmax != out.partition && !eval.Exhausted()) {
    ASSIGN_OR_RETURN(double t, eval.Makespan(*minmax));
    if (t < out.makespan_us) {
      out.partition = *std::move(minmax);
      out.makespan_us = t;
    }
  }
  bool improved = true;
  while (improved && !eval.Exhausted()) {
    improved = false;
    std::optional<Partition> best;
    double best_t = out.makespan_us;
    // The neighbours a sequential loop would reach before max_evaluations,
    // simulated side by side, then taken in order: the same choice whatever
    // the thread count.
    std::vector<Partition> next = Neighbours(out.partition, model);
    next.resize(std::min(next.size(), static_cast<size_t>(eval.Remaining())));
    ASSIGN_OR_RETURN(std::vector<double> times,
                     ParallelMap<double>(static_cast<int>(next.size()), options.threads,
                                         [&](int i) { return eval.Simulate(next[i]); }));
    eval.Count(static_cast<int>(next.size()));
    for (size_t i = 0; i < next.size(); ++i) {
      if (times[i] < best_t * (1 - 1e-12)) {
        best = next[i];
        best_t = times[i];
      }
    }
    if (best.has_value()) {
      out.partition = *std::move(best);
      out.makespan_us = best_t;
      improved = true;
    }
  }
  out.evaluations = eval.evaluations();
  out.budget_ended = eval.budget_ended();
  return out;
}

}  // namespace jitpipe
