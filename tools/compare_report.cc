#include "tools/compare_report.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "planning/partition.h"
#include "scheduler/generators/generate.h"
#include "stages/predict/predict.h"
#include "base/byte_units.h"
#include "base/time_units.h"
#include "tools/memory_report.h"
#include "tools/schedule_diagram.h"
#include "traces/svg_render.h"

namespace jitpipe::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string Cut(const CompareOptions& o) {
  if (!o.partition.layout.empty()) return absl::StrCat("cut by layout \"", o.partition.layout, "\"");
  return o.partition.method == PartitionMethod::kBalanced ? "cut balanced per schedule"
                                                          : "cut evenly";
}

// What "fits" was judged against: the limit less its reserve (the jit
// peak of the activations, with parameters, gradients and optimizer).
std::string Device(const LayeredModel& m) {
  const int64_t reserve = m.device.ReserveFor(0);
  const std::string less =
      reserve > 0 ? absl::StrCat(" less a ", FormatBytes(reserve), " reserve") : "";
  if (!m.device.rank_memory_bytes.empty()) {
    return absl::StrCat("the device (per-rank limits", reserve > 0 ? ", less their reserve" : "",
                        ")");
  }
  if (m.device.memory_bytes > 0) {
    return absl::StrCat("the device (", FormatBytes(m.device.memory_bytes), less, ")");
  }
  return "the device (no limit in the model)";
}

// Schedules with no row at all, each with its first refusal; not those the
// time budget left unjudged at some v (they are listed as not judged).
std::vector<CompareSkipped> Unrun(const Comparison& c) {
  std::set<std::string> ran;
  for (const CompareRow& r : c.rows) ran.insert(r.schedule);
  for (const CompareSkipped& s : c.skipped) {
    if (s.out_of_time) ran.insert(s.schedule);
  }
  std::vector<CompareSkipped> out;
  std::set<std::string> listed;
  for (const CompareSkipped& s : c.skipped) {
    if (ran.count(s.schedule) || !listed.insert(s.schedule).second) continue;
    out.push_back(s);
  }
  return out;
}

// Tokens per second per GPU: "-" when the model gives no workload.
std::string TokensCell(const StepFigures& f) {
  if (f.tokens_per_step <= 0) return "-";
  return absl::StrFormat("%.0f", f.tokens_per_s_per_gpu);
}

std::string MfuCell(const StepFigures& f) {
  return f.mfu.has_value() ? absl::StrFormat("%.1f%%", 100 * *f.mfu) : "-";
}

// What the step, tokens and MFU columns mean here, and what is missing.
void PrintFigureNotes(const CompareHeader& h, const Comparison& c) {
  const CompareOptions& o = *h.options;
  const LayeredModel& m = *h.model;
  const WorkloadSpec& w = m.workload;
  std::printf("step = the simulated makespan of one step; bubble = pipeline (the busiest "
              "rank's idle) + imbalance ((busiest - least busy rank's work) / step)\n");
  if (c.rows.empty()) return;
  const StepFigures& f = c.rows.front().figures;
  if (f.tokens_per_step <= 0) {
    std::printf("tok/s/GPU, MFU: the model gives no workload (microbatch size, sequence "
                "length); jitpipe model writes it\n");
    return;
  }
  std::printf("tok/s/GPU = %lld tokens per step (%d microbatches x b %lld x s %lld x dp %d = "
              "global batch %lld sequences) / step / %lld GPUs (pp %d x dp %d x tp %d)\n",
              static_cast<long long>(f.tokens_per_step), o.microbatches,
              static_cast<long long>(w.microbatch_size), static_cast<long long>(w.seq_len),
              m.dp.size,
              static_cast<long long>(int64_t{o.microbatches} * w.microbatch_size * m.dp.size),
              static_cast<long long>(f.gpus), o.pp, m.dp.size, w.tp);
  if (w.model_flops_per_microbatch <= 0) {
    std::printf("MFU: the model does not give its FLOPs per microbatch\n");
  } else if (m.device.peak_tflops <= 0) {
    std::printf("MFU: give --peak-tflops (one GPU's dense peak, e.g. 989 for an H100 SXM in "
                "bf16) or device.peak_tflops in the model\n");
  } else {
    std::printf("MFU = %.4g model FLOPs per microbatch x %d x dp %d / (step x %lld GPUs x %.4g "
                "TFLOP/s peak): derived from the simulated step, a model, not a measurement\n",
                w.model_flops_per_microbatch, o.microbatches, m.dp.size,
                static_cast<long long>(f.gpus), m.device.peak_tflops);
  }
}

}  // namespace

void PrintComparisonTable(const CompareHeader& h, const Comparison& c) {
  const CompareOptions& o = *h.options;
  std::printf("%s: pp %d, %d microbatches; %d layers %s; every row runs the same layers "
              "(%s of compute per rank on average)\n",
              h.model_path.c_str(), o.pp, o.microbatches,
              static_cast<int>(h.model->layers.size()), Cut(o).c_str(),
              FormatMicros(c.rows.empty() ? 0.0 : c.rows.front().work_us).c_str());
  std::printf("sorted by makespan among the rows that fit %s, * = best; memory: the heaviest "
              "rank, all of it\n", Device(*h.model).c_str());
  // Times in ms when the steps take 10 ms or more, else in us.
  double longest = 0;
  for (const CompareRow& r : c.rows) longest = std::max(longest, r.simulation.makespan_us);
  const bool ms = longest >= 1e4;
  const double scale = ms ? 1e-3 : 1;
  const char* unit = ms ? "ms" : "us";
  std::printf("  %-18s %2s %10s %8s %9s %10s %12s %11s %10s %7s %17s %16s\n", "schedule",
              "v", absl::StrCat("step ", unit).c_str(), "bubble", "pipeline", "imbalance",
              "span bubble", absl::StrCat("exposed ", unit).c_str(), "tok/s/GPU", "MFU",
              "heaviest (rank)", "fits");
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    const std::string heaviest = absl::StrCat(FormatBytes(r.memory.Heaviest().total()), " (",
                                              r.memory.heaviest, ")");
    std::printf("%c %-18s %2d %10.*f %7.2f%% %8.2f%% %9.2f%% %11.2f%% %11.*f %10s %7s %17s %16s\n",
                static_cast<int>(i) == c.best ? '*' : ' ', r.schedule.c_str(),
                r.stages_per_rank, ms ? 1 : 2, scale * r.simulation.makespan_us,
                100 * r.simulation.bubble_fraction, 100 * r.bubble.pipeline,
                100 * r.bubble.imbalance, 100 * r.simulation.span_bubble_fraction, ms ? 1 : 2,
                scale * r.simulation.exposed_reduce_us, TokensCell(r.figures).c_str(),
                MfuCell(r.figures).c_str(), heaviest.c_str(), FitCell(r.memory).c_str());
  }
  PrintFigureNotes(h, c);
  std::vector<std::string> duplicates;
  for (const CompareRow& r : c.rows) {
    if (!r.same_as.empty()) {
      duplicates.push_back(absl::StrCat(r.schedule, " v", r.stages_per_rank, " = ", r.same_as));
    }
  }
  if (!duplicates.empty()) {
    std::printf("the same program as an earlier row: %s\n", absl::StrJoin(duplicates, ", ").c_str());
  }
  if (c.best < 0 && !c.rows.empty()) {
    std::printf("no schedule fits: every row runs out of memory on some rank\n");
  }
  std::vector<std::string> cut_short, unjudged;
  for (const CompareRow& r : c.rows) {
    if (r.budget_ended) cut_short.push_back(absl::StrCat(r.schedule, " v", r.stages_per_rank));
  }
  for (const CompareSkipped& s : c.skipped) {
    if (s.out_of_time) unjudged.push_back(absl::StrCat(s.schedule, " v", s.stages_per_rank));
  }
  if (!cut_short.empty()) {
    std::printf("the time budget ended the balanced search of %s: judged on the best cut found "
                "by then\n", absl::StrJoin(cut_short, ", ").c_str());
  }
  if (!unjudged.empty()) {
    std::printf("not judged: the time budget (%s, --time-budget) had passed before %s started\n",
                absl::FormatDuration(o.time_budget).c_str(),
                absl::StrJoin(unjudged, ", ").c_str());
  }
  const std::vector<CompareSkipped> unrun = Unrun(c);
  if (unrun.empty()) return;
  std::printf("not valid for these parameters:\n");
  for (const CompareSkipped& s : unrun) {
    const bool named = s.reason.rfind(s.schedule + ": ", 0) == 0;
    std::printf("  %s%s\n", named ? "" : (s.schedule + ": ").c_str(), s.reason.c_str());
  }
}

void PrintComparisonJson(const CompareHeader& h, const Comparison& c) {
  const CompareOptions& o = *h.options;
  Json out;
  out["model"] = h.model_path;
  out["pp"] = o.pp;
  out["microbatches"] = o.microbatches;
  out["stages_per_rank"] = o.stages_per_rank;
  out["partition"] = o.partition.layout.empty()
                         ? Json(PartitionMethodName(o.partition.method))
                         : Json("layout");
  out["overlap"] = o.overlap;
  const LayeredModel& m = *h.model;
  out["dp"] = m.dp.size;
  out["tp"] = m.workload.tp;
  out["gpus"] = int64_t{o.pp} * m.dp.size * m.workload.tp;
  out["microbatch_size"] = m.workload.microbatch_size > 0 ? Json(m.workload.microbatch_size)
                                                          : Json(nullptr);
  out["seq_len"] = m.workload.seq_len > 0 ? Json(m.workload.seq_len) : Json(nullptr);
  out["global_batch"] = m.workload.microbatch_size > 0
                            ? Json(int64_t{o.microbatches} * m.workload.microbatch_size *
                                   m.dp.size)
                            : Json(nullptr);
  out["peak_tflops"] = m.device.peak_tflops > 0 ? Json(m.device.peak_tflops) : Json(nullptr);
  out["mfu_note"] = "derived from the simulated step (a model, not a measurement)";
  out["time_budget_s"] = o.time_budget == absl::InfiniteDuration()
                             ? Json(nullptr)
                             : Json(absl::ToDoubleSeconds(o.time_budget));
  Json rows = Json::array();
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    const RankMemory& tight = r.memory.Tightest();
    const bool known = r.figures.tokens_per_step > 0;
    rows.push_back({{"schedule", r.schedule},
                    {"stages_per_rank", r.stages_per_rank},
                    {"layout", r.layout},
                    {"best", static_cast<int>(i) == c.best},
                    {"work_us", r.work_us},
                    {"makespan_us", r.simulation.makespan_us},
                    {"step_s", r.figures.step_s},
                    {"bubble_fraction", r.simulation.bubble_fraction},
                    {"pipeline_bubble_fraction", r.bubble.pipeline},
                    {"imbalance_fraction", r.bubble.imbalance},
                    {"span_bubble_fraction", r.simulation.span_bubble_fraction},
                    {"exposed_reduce_us", r.simulation.exposed_reduce_us},
                    {"reduce_us", r.simulation.max_rank_reduce_us},
                    {"tokens_per_step", known ? Json(r.figures.tokens_per_step) : Json(nullptr)},
                    {"tokens_per_s", known ? Json(r.figures.tokens_per_s) : Json(nullptr)},
                    {"tokens_per_s_per_gpu",
                     known ? Json(r.figures.tokens_per_s_per_gpu) : Json(nullptr)},
                    {"mfu", r.figures.mfu ? Json(*r.figures.mfu) : Json(nullptr)},
                    {"budget_ended", r.budget_ended},
                    {"heaviest_rank", r.memory.heaviest},
                    {"heaviest_bytes", r.memory.Heaviest().total()},
                    {"fits", r.fits()},
                    {"same_as", r.same_as.empty() ? Json(nullptr) : Json(r.same_as)},
                    {"margin_bytes", tight.has_limit() ? Json(tight.margin()) : Json(nullptr)},
                    {"memory", MemoryJson(r.memory)}});
  }
  out["schedules"] = std::move(rows);
  Json skipped = Json::array();
  for (const CompareSkipped& s : c.skipped) {
    skipped.push_back(
        {{"schedule", s.schedule}, {"stages_per_rank", s.stages_per_rank}, {"reason", s.reason},
         {"out_of_time", s.out_of_time}});
  }
  out["skipped"] = std::move(skipped);
  std::printf("%s\n", out.dump(1).c_str());
}

absl::Status WriteWinnerSvg(const CompareHeader& h, const Comparison& c,
                            const std::string& svg_path) {
  if (c.best < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no schedule fits the device, so there is no winner to draw in ", svg_path));
  }
  const CompareRow& best = c.rows[c.best];
  const CompareOptions& o = *h.options;
  ASSIGN_OR_RETURN(Schedule s, Generate({.schedule = best.schedule,
                                         .pp = o.pp,
                                         .microbatches = o.microbatches,
                                         .stages_per_rank = best.stages_per_rank}));
  ASSIGN_OR_RETURN(Partition cut, ParseLayout(best.layout, *h.model, s.stages_per_chain()));
  ASSIGN_OR_RETURN(Model staged, StageModel(*h.model, cut, s.chains));
  ASSIGN_OR_RETURN(Prediction p,
                   Predict(s, staged, {.overlap = o.overlap, .record_timeline = true}));
  const std::string title =
      ScheduleTitle(best.schedule, p, SvgTimeUnit::kMicroseconds,
                    absl::StrCat("model ", h.model_path, ", layout ", best.layout));
  ASSIGN_OR_RETURN(std::string svg,
                   RenderSvg(ScheduleDiagram(title, p, SvgTimeUnit::kMicroseconds)));
  return WriteFileAtomically(svg_path, svg);
}

}  // namespace jitpipe::cli
