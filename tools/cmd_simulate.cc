// jitpipe simulate FILE --model MODEL [--trace OUT] [--json] [--overlap]
// [--compare-overlap]: the predicted step of a schedule under a cost model.
//
// A compute-only FILE is lowered first with the default lowering plus
// REDUCE_GRAD (so reductions are modelled); --overlap also runs the overlap
// pass (on a lowered FILE too). stdout: a per-rank table (busy time, span,
// end, reduction time, peak bytes at simulated time) and a summary line
// (makespan, both bubble measures, exposed reduction). --compare-overlap
// simulates the program without and with the overlap pass and reports the
// exposed reduction of both. --json prints docs/design.md's shape, with more keys
// (see PrintJson). --trace writes the simulated timeline as a Chrome trace.
// A lowered FILE without REDUCE_GRAD while the model's dp.size > 1 is
// simulated as given, with a note on stderr that reductions are not modelled.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_units.h"
#include "base/time_units.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model.h"
#include "planning/reduction_floor.h"
#include "stages/predict/predict.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/model_input.h"
#include "traces/chrome_trace_writer.h"
#include "traces/timeline_trace.h"

ABSL_FLAG(bool, compare_overlap, false,
          "also simulate without and with the overlap pass and report both exposed reductions");

namespace jitpipe::cli {
namespace {

using Json = nlohmann::ordered_json;

double Percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

void PrintTable(const std::string& path, const Prediction& p, bool overlap,
                const std::string& cut) {
  const Schedule& s = p.lowered;
  const SimulationResult& r = p.simulation;
  std::printf("%s: pp %d, %d stages, %d microbatches; %s%s\n", path.c_str(), s.pp,
              s.num_stages(), s.microbatches, s.name.empty() ? "" : (s.name + ", ").c_str(),
              overlap ? "with the overlap pass" : "as lowered");
  if (!cut.empty()) std::printf("%s\n", cut.c_str());
  std::printf("%4s %12s %12s %12s %12s %14s\n", "rank", "busy", "span", "end", "reduce",
              "peak");
  for (const RankSimulation& rank : r.ranks) {
    std::printf("%4d %12s %12s %12s %12s %14s\n", rank.rank, FormatMicros(rank.busy_us).c_str(),
                FormatMicros(rank.span_us).c_str(), FormatMicros(rank.end_us).c_str(),
                FormatMicros(rank.reduce_us).c_str(), FormatBytes(rank.peak_bytes).c_str());
  }
  std::printf(
      "makespan %s; bubble %.2f%% (1 - busy/makespan, worst rank); span bubble %.2f%% "
      "(1 - busy/longest span); exposed reduction %s of %s reduction per rank (%.1f%%)\n",
      FormatMicros(r.makespan_us).c_str(), 100 * r.bubble_fraction, 100 * r.span_bubble_fraction,
      FormatMicros(r.exposed_reduce_us).c_str(), FormatMicros(r.max_rank_reduce_us).c_str(),
      Percent(r.exposed_reduce_us, r.max_rank_reduce_us));
  std::printf("peak: every planned buffer live at simulated time, parameter gradients "
              "included (--json has the exact bytes and microseconds)\n");
}

Json ResultJson(const SimulationResult& r) {
  Json out;
  out["makespan_us"] = r.makespan_us;
  out["bubble_fraction"] = r.bubble_fraction;
  out["span_bubble_fraction"] = r.span_bubble_fraction;
  out["exposed_reduce_us"] = r.exposed_reduce_us;
  out["reduce_us"] = r.max_rank_reduce_us;
  Json ranks = Json::array();
  for (const RankSimulation& rank : r.ranks) {
    ranks.push_back({{"rank", rank.rank},
                     {"busy_us", rank.busy_us},
                     {"span_us", rank.span_us},
                     {"peak_bytes", rank.peak_bytes},
                     {"first_start_us", rank.first_start_us},
                     {"end_us", rank.end_us},
                     {"reduce_us", rank.reduce_us}});
  }
  out["ranks"] = std::move(ranks);
  return out;
}

// The overlap pass's merge decisions (overlap_merge.h), one per rank tried.
Json MergesJson(const std::vector<BackwardMergeDecision>& merges) {
  Json out = Json::array();
  for (const BackwardMergeDecision& d : merges) {
    out.push_back({{"rank", d.rank},
                   {"stage", d.stage},
                   {"microbatch", d.microbatch},
                   {"merged", d.merged},
                   {"makespan_split_us", d.makespan_split_us},
                   {"makespan_merged_us", d.makespan_merged_us},
                   {"raises_peak", d.raises_peak},
                   {"explanation", d.ToString()}});
  }
  return out;
}

// The exposed reduction without and with the overlap pass.
struct OverlapComparison {
  SimulationResult without, with;
  double minimum_us = 0;  // planning/reduction_floor.h, for the order with the pass
};

void PrintComparison(const OverlapComparison& c) {
  std::printf(
      "exposed reduction: %s without the overlap pass (%.1f%%), %s with it (%.1f%%), "
      "of %s reduction per rank; makespan %s -> %s; theoretical minimum %s "
      "(%.1f%%: the stage that completes last on the rank that finishes last)\n",
      FormatMicros(c.without.exposed_reduce_us).c_str(),
      Percent(c.without.exposed_reduce_us, c.without.max_rank_reduce_us),
      FormatMicros(c.with.exposed_reduce_us).c_str(),
      Percent(c.with.exposed_reduce_us, c.with.max_rank_reduce_us),
      FormatMicros(c.with.max_rank_reduce_us).c_str(), FormatMicros(c.without.makespan_us).c_str(),
      FormatMicros(c.with.makespan_us).c_str(), FormatMicros(c.minimum_us).c_str(),
      Percent(c.minimum_us, c.with.max_rank_reduce_us));
}

absl::Status WriteTrace(const std::string& trace_path, const std::string& path,
                        const Prediction& p) {
  absl::StatusOr<ChromeTraceWriter> writer = ChromeTraceWriter::ToFile(trace_path);
  if (!writer.ok()) return writer.status();
  AddTimelineToTrace(p.lowered, p.simulation.timeline, *writer);
  writer->SetMetadata("source", path);
  writer->SetMetadata("clock", "simulated");
  writer->SetMetadata("makespan_us", p.simulation.makespan_us);
  writer->SetMetadata("exposed_reduce_us", p.simulation.exposed_reduce_us);
  return writer->Finish();
}

int RunSimulate(const Command& command, const Invocation& invocation) {
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (model_path.empty()) return UsageError(command, "--model MODEL is required");
  const bool overlap = absl::GetFlag(FLAGS_overlap);
  const bool compare = absl::GetFlag(FLAGS_compare_overlap);
  absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
  if (!partition.ok()) return UsageError(command, partition.status().message());
  partition->predict.overlap = overlap;
  partition->predict.last_backward = absl::GetFlag(FLAGS_overlap_merge)
                                         ? LastBackward::kMergeWhereShorter
                                         : LastBackward::kKeepSplit;
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  absl::StatusOr<StagedModel> staged = LoadModelForSchedule(model_path, *schedule, *partition);
  if (!staged.ok()) return Fail(command, staged.status());
  const Model* model = &staged->model;
  auto failed = [&](const absl::Status& s) {
    return Fail(command, absl::Status(s.code(), absl::StrCat(path, ": ", s.message())));
  };

  const std::string trace_path = absl::GetFlag(FLAGS_trace);
  // The schedule is simulated in place unless --compare simulates it again.
  Schedule simulated = compare ? *schedule : std::move(*schedule);
  absl::StatusOr<Prediction> p =
      Predict(std::move(simulated), *model,
              {.overlap = overlap,
               .last_backward = partition->predict.last_backward,
               .record_timeline = !trace_path.empty()});
  if (!p.ok()) return failed(p.status());
  if (!p->reductions_modelled) {
    std::fprintf(stderr,
                 "jitpipe simulate: note: %s has no REDUCE_GRAD but the model's dp.size is %d: "
                 "gradient reductions are not modelled (lower with --reduce-grad)\n",
                 path.c_str(), model->dp.size);
  }
  std::optional<OverlapComparison> comparison;
  if (compare) {
    absl::StatusOr<Prediction> other =
        Predict(*schedule, *model,
                {.overlap = !overlap, .last_backward = partition->predict.last_backward});
    if (!other.ok()) return failed(other.status());
    const Prediction& with = overlap ? *p : *other;
    comparison = OverlapComparison{overlap ? other->simulation : p->simulation, with.simulation,
                                   MinimumExposedReduceUs(with.lowered, *model, with.simulation)};
  }
  if (!trace_path.empty()) {
    if (absl::Status s = WriteTrace(trace_path, path, *p); !s.ok()) return Fail(command, s);
  }
  if (absl::GetFlag(FLAGS_json)) {
    Json out = ResultJson(p->simulation);
    out["total_reduce_us"] = p->simulation.total_reduce_us;
    out["minimum_exposed_reduce_us"] = MinimumExposedReduceUs(p->lowered, *model, p->simulation);
    out["reductions_modelled"] = p->reductions_modelled;
    out["overlap"] = overlap;
    if (overlap) out["overlap_merges"] = MergesJson(p->overlap_merges);
    if (staged->layered) out["layout"] = staged->layout;
    if (comparison.has_value()) {
      out["compare_overlap"] = {{"without", ResultJson(comparison->without)},
                                {"with", ResultJson(comparison->with)},
                                {"minimum_exposed_reduce_us", comparison->minimum_us}};
    }
    std::printf("%s\n", out.dump(1).c_str());
    return kExitOk;
  }
  PrintTable(path, *p, overlap, CutLine(*staged));
  for (const BackwardMergeDecision& d : p->overlap_merges) {
    std::printf("overlap: %s\n", d.ToString().c_str());
  }
  if (comparison.has_value()) PrintComparison(*comparison);
  return kExitOk;
}

}  // namespace

Command SimulateCommand() {
  return Command{
      .name = "simulate",
      .synopsis = "simulate FILE --model MODEL [--layout L | --partition even|balanced] "
                  "[--trace OUT] [--json] [--overlap [--overlap-merge=false]] [--compare-overlap]",
      .summary =
          "Predict one step of a schedule under a cost model: a deterministic discrete-event "
          "simulation (compute stream per rank; transfers start when both SEND and RECV are "
          "posted; gradient reductions on a reduction stream, in dp.buckets buckets, waited at "
          "the end of the step). A compute-only FILE is lowered first (receives just in time, "
          "REDUCE_GRAD on). Prints per rank the busy time, span, end, reduction time and peak "
          "bytes at simulated time, then the makespan, the bubble (1 - busy/makespan, worst "
          "rank), the span bubble (the zero-bubble papers' measure) and the exposed reduction "
          "(the step with reductions minus the same step with free ones). --overlap runs the "
          "overlap pass (which may merge the last I and W of the rank that ends the step into a B "
          "where the step does not get longer; --overlap-merge=false keeps them split, and the "
          "decisions are printed); --compare-overlap reports the exposed reduction without and with it, and "
          "the theoretical minimum (planning/reduction_floor.h). "
          "--trace writes the simulated timeline as a Chrome trace. A version 2 (layered) MODEL is "
          "cut into the schedule's stages by --layout, --partition, the cut the schedule file records (auto writes it), else evenly; the cut used is printed.",
      .flags = {"model", "layout", "partition", "time_budget", "trace", "json", "overlap", "overlap_merge",
                "compare_overlap", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunSimulate,
  };
}

}  // namespace jitpipe::cli
