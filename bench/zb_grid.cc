// Issue 38's grid: the zero-bubble repository's heuristic against the auto
// scheduler, as a table (quality, not speed; nothing here is timed).
//
// Per case, on the same model and memory limit:
//   - heuristic: upstream zb.py's initial_solution order
//     (planning/zero_bubble_heuristic.h, checked against upstream's orders
//     in tests/testdata/zero_bubble/costed/), simulated by jitpipe lowered
//     the better of receives early and just in time;
//   - auto: AutoSchedule, what `jitpipe generate --schedule auto --model M
//     --pp P --microbatches m --memory-limit L --time-budget 60` writes,
//     its step as lowered;
//   - bound: AutoScheduleResult::best_lower_bound_us, the smallest over the
//     placements searched of planning's PipelineLowerBound (a rank's start
//     + its busy time, or one microbatch's critical path), which for one
//     stage per rank is m (F + I + W) plus the fill latency.
// and each step's distance to the bound in %. The last line counts the
// cases where auto's step is no longer than the heuristic's.
//
// The grid: costs balanced (F = I = W = 1, latency 0), typical (F 1, I 1.1,
// W 0.7, latency 0.05 per hop), heavy backward (F 1, I 1.6, W 1.2, latency
// 0.1); pp 4 and 8; m 2p and 4p; caps p, 1.5p and 2p live activations. The
// model has 2p layers (a rank's two cost the figures above and hold one
// unit of stash), no parameters, nothing sent but latency, so the limit is
// the activation cap. 36 cases.
//
// Usage: zb_grid [--filter SUBSTRING] [--stages-per-rank 1|2]: the latter
// limits auto's search as `generate --stages-per-rank` does (1: the
// heuristic's own placement family). Exit status 1 when a case errs.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "planning/auto_schedule.h"
#include "planning/partition.h"
#include "planning/zero_bubble_heuristic.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/zero_bubble_grid.h"

namespace jitpipe::bench {
namespace {

using ::jitpipe::testing::GridCosts;
using ::jitpipe::testing::GridModel;
using ::jitpipe::testing::kGridUnit;

constexpr GridCosts kCosts[] = {::jitpipe::testing::kGridBalanced, ::jitpipe::testing::kGridTypical,
                                ::jitpipe::testing::kGridHeavyBackward};

absl::StatusOr<HeuristicResult> Heuristic(const ModelFile& file, int pp, int m, int64_t limit) {
  ASSIGN_OR_RETURN(Partition cut, EvenPartition(file.layers, pp));
  ASSIGN_OR_RETURN(Model model, StageModel(file.layers, cut));
  const TrainingMemory training{.optimizer = {.kind = OptimizerKind::kNone},
                                .device = {.memory_bytes = limit}};
  return ZeroBubbleHeuristic(model, training, pp, m);
}

double Over(double t, double bound) { return 100 * (t / bound - 1); }

int Run(const char* filter, std::vector<int> stages_per_rank) {
  std::printf("| case | heuristic | recv | heuristic flags | auto | chosen | bound | "
              "heuristic vs bound | auto vs bound | auto <= heuristic |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  int cases = 0, auto_wins = 0, errors = 0;
  for (const GridCosts& costs : kCosts) {
    for (int pp : {4, 8}) {
      for (int m : {2 * pp, 4 * pp}) {
        for (double cap : {1.0, 1.5, 2.0}) {
          const std::string label =
              absl::StrFormat("%s pp%d m%d cap %.3gp", costs.name, pp, m, cap);
          if (filter != nullptr && !absl::StrContains(label, filter)) continue;
          ++cases;
          const ModelFile file = GridModel(costs, pp);
          const int64_t limit = static_cast<int64_t>(cap * pp * kGridUnit);
          absl::StatusOr<HeuristicResult> h = Heuristic(file, pp, m, limit);
          absl::StatusOr<AutoScheduleResult> a = AutoSchedule(
              file, {.pp = pp, .microbatches = m, .memory_limit = limit,
                     .stages_per_rank = stages_per_rank, .time_budget = absl::Seconds(60)});
          if (!a.ok()) {
            std::printf("| %s | error: %s |\n", label.c_str(),
                        std::string(a.status().message()).c_str());
            ++errors;
            continue;
          }
          const double bound = a->best_lower_bound_us;
          const double t_auto = a->evaluation.makespan_us;
          std::string heuristic = "none fits", recv = "-", flags = "-", h_over = "-";
          bool wins = true;
          if (h.ok()) {
            const double t = h->evaluation.makespan_us;
            heuristic = absl::StrFormat("%.4g", t);
            recv = std::string(RecvPlacementName(h->evaluation.recv));
            flags = h->flags + (h->caps_lowered > 0
                                    ? absl::StrFormat(" (cap lowered %dx)", h->caps_lowered)
                                    : "");
            h_over = absl::StrFormat("%.2f%%", Over(t, bound));
            wins = t_auto <= t + 1e-9;
          } else if (h.status().code() != absl::StatusCode::kNotFound) {
            heuristic = "error: " + std::string(h.status().message());
            ++errors;
          }
          auto_wins += wins ? 1 : 0;
          std::printf("| %s | %s | %s | %s | %.4g | %s | %.4g | %s | %.2f%% | %s |\n",
                      label.c_str(), heuristic.c_str(), recv.c_str(), flags.c_str(), t_auto,
                      a->description.c_str(), bound, h_over.c_str(), Over(t_auto, bound),
                      wins ? "yes" : "NO");
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("\nauto >= heuristic on %d/%d\n", auto_wins, cases);
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace jitpipe::bench

int main(int argc, char** argv) {
  const char* filter = nullptr;
  std::vector<int> stages_per_rank = {1, 2};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      filter = argv[++i];
    } else if (std::strcmp(argv[i], "--stages-per-rank") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "1") == 0 || std::strcmp(argv[i + 1], "2") == 0)) {
      stages_per_rank = {argv[++i][0] - '0'};
    } else {
      std::fprintf(stderr, "usage: zb_grid [--filter SUBSTRING] [--stages-per-rank 1|2]\n");
      return 2;
    }
  }
  return jitpipe::bench::Run(filter, stages_per_rank);
}
