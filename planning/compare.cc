#include "planning/compare.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/model_file.h"
#include "stages/predict/predict.h"

namespace jitpipe {
namespace {

struct Candidate {
  const GeneratorInfo* generator = nullptr;
  int v = 0;
};

// What execution sees of a program: the cut, its placement and every rank's
// actions, bubbles left out (they are display only).
uint64_t ProgramHash(const Schedule& s, const std::string& layout) {
  std::string text = absl::StrCat(layout, "#", s.chains, ":");
  for (int r : s.stage_to_rank) absl::StrAppend(&text, r, ",");
  for (const RankProgram& program : s.ranks) {
    text += "|";
    for (const Action& a : program) {
      if (!a.is_bubble()) absl::StrAppend(&text, a.ToString(), " ");
    }
  }
  return absl::HashOf(text);
}

absl::StatusOr<CompareRow> Evaluate(const ModelFile& file, const Candidate& c,
                                    const CompareOptions& options, absl::Duration remaining) {
  ASSIGN_OR_RETURN(Schedule s, Generate({.schedule = c.generator->name,
                                         .pp = options.pp,
                                         .microbatches = options.microbatches,
                                         .stages_per_rank = c.v}));
  PartitionChoice choice = options.partition;
  choice.predict.overlap = options.overlap;
  choice.time_budget = std::min(choice.time_budget, remaining);
  // A row's balanced search also runs its neighbours side by side: the
  // costliest rows (zero-bubble schedules with the overlap pass) otherwise
  // finish alone on one core long after the others.
  choice.threads = options.threads;
  ASSIGN_OR_RETURN(StagedModel staged, ModelForSchedule(file, s, choice));
  ASSIGN_OR_RETURN(Prediction p, Predict(s, staged.model, {.overlap = options.overlap}));
  CompareRow row{.schedule = c.generator->name,
                 .stages_per_rank = s.stages_per_rank,
                 .layout = staged.partition->ToLayout(file.layers),
                 .simulation = std::move(p.simulation),
                 .budget_ended = staged.budget_ended,
                 .program_hash = 0};
  row.bubble = SplitBubble(row.simulation);
  if (row.simulation.makespan_us > 0) {
    row.figures = StepFiguresOf(file.layers, options.pp, options.microbatches,
                                row.simulation.makespan_us);
  }
  row.program_hash = ProgramHash(s, row.layout);
  double busy = 0;
  for (const RankSimulation& r : row.simulation.ranks) busy += r.busy_us;
  row.work_us = busy / s.pp;
  ASSIGN_OR_RETURN(row.memory, PlanRankMemories(p.lowered, staged.model, staged.training));
  return row;
}

bool RowOrder(const CompareRow& a, const CompareRow& b) {
  return std::make_tuple(!a.fits(), a.simulation.makespan_us, a.schedule, a.stages_per_rank) <
         std::make_tuple(!b.fits(), b.simulation.makespan_us, b.schedule, b.stages_per_rank);
}

}  // namespace

absl::StatusOr<Comparison> CompareSchedules(const LayeredModel& model,
                                            const CompareOptions& options) {
  if (options.pp < 1 || options.microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("pp and microbatches must be >= 1, got ",
                                                   options.pp, " and ", options.microbatches));
  }
  for (int v : options.stages_per_rank) {
    if (v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("stages per rank must be >= 1, got ", v));
    }
  }
  const ModelFile file{.version = kLayeredModelVersion, .stages = {}, .layers = model};
  std::vector<Candidate> candidates;
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int v : options.stages_per_rank) candidates.push_back({&g, v});
  }
  std::vector<absl::StatusOr<CompareRow>> results(candidates.size(),
                                                  absl::UnknownError("not evaluated"));
  std::vector<char> out_of_time(candidates.size(), 0);
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const int total = static_cast<int>(candidates.size());
  const absl::Time start = absl::Now();
  std::mutex progress_mutex;
  int done = 0;
  // Judged v by v (every schedule at its smallest v first): the cheapest
  // candidates first, so that a short budget still sees every schedule.
  std::vector<int> order(candidates.size());
  for (int i = 0; i < total; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return candidates[a].v < candidates[b].v; });
  ParallelFor(total, threads, [&](int k) {
    const int i = order[k];
    const absl::Duration remaining = options.time_budget - (absl::Now() - start);
    // Past the budget a candidate is still generated (cheap), so that one
    // its schedule refuses says why rather than "not judged".
    if (remaining <= absl::ZeroDuration()) {
      absl::StatusOr<Schedule> refused = Generate({.schedule = candidates[i].generator->name,
                                                   .pp = options.pp,
                                                   .microbatches = options.microbatches,
                                                   .stages_per_rank = candidates[i].v});
      out_of_time[i] = refused.ok();
      results[i] = refused.ok() ? absl::DeadlineExceededError(
          absl::StrCat("not judged: the time budget of ",
                       absl::FormatDuration(options.time_budget), " had passed"))
                                : refused.status();
    } else {
      results[i] = Evaluate(file, candidates[i], options, remaining);
    }
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      options.progress(++done, total);
    }
  });
  Comparison out;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (results[i].ok()) {
      out.rows.push_back(*std::move(results[i]));
    } else {
      out.skipped.push_back({.schedule = candidates[i].generator->name,
                             .stages_per_rank = candidates[i].v,
                             .reason = std::string(results[i].status().message()),
                             .out_of_time = out_of_time[i] != 0});
    }
  }
  std::stable_sort(out.rows.begin(), out.rows.end(), RowOrder);
  absl::flat_hash_map<uint64_t, std::string> first;
  for (CompareRow& row : out.rows) {
    auto [it, inserted] = first.try_emplace(row.program_hash,
                                            absl::StrCat(row.schedule, " v", row.stages_per_rank));
    if (!inserted) row.same_as = it->second;
  }
  if (!out.rows.empty() && out.rows.front().fits()) out.best = 0;
  return out;
}

}  // namespace jitpipe
