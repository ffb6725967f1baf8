#include "tools/compare_report.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
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

// Schedules with no row at all, each with its first refusal.
std::vector<CompareSkipped> Unrun(const Comparison& c) {
  std::set<std::string> ran;
  for (const CompareRow& r : c.rows) ran.insert(r.schedule);
  std::vector<CompareSkipped> out;
  std::set<std::string> listed;
  for (const CompareSkipped& s : c.skipped) {
    if (ran.count(s.schedule) || !listed.insert(s.schedule).second) continue;
    out.push_back(s);
  }
  return out;
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
  std::printf("  %-18s %2s %12s %8s %12s %12s %17s %16s\n", "schedule", "v",
              absl::StrCat("makespan ", unit).c_str(), "bubble", "span bubble",
              absl::StrCat("exposed ", unit).c_str(), "heaviest (rank)", "fits");
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    const std::string heaviest = absl::StrCat(FormatBytes(r.memory.Heaviest().total()), " (",
                                              r.memory.heaviest, ")");
    std::printf("%c %-18s %2d %12.*f %7.2f%% %11.2f%% %12.*f %17s %16s\n",
                static_cast<int>(i) == c.best ? '*' : ' ', r.schedule.c_str(),
                r.stages_per_rank, ms ? 1 : 2, scale * r.simulation.makespan_us,
                100 * r.simulation.bubble_fraction, 100 * r.simulation.span_bubble_fraction,
                ms ? 1 : 2, scale * r.simulation.exposed_reduce_us, heaviest.c_str(),
                FitCell(r.memory).c_str());
  }
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
  Json rows = Json::array();
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    const RankMemory& tight = r.memory.Tightest();
    rows.push_back({{"schedule", r.schedule},
                    {"stages_per_rank", r.stages_per_rank},
                    {"layout", r.layout},
                    {"best", static_cast<int>(i) == c.best},
                    {"work_us", r.work_us},
                    {"makespan_us", r.simulation.makespan_us},
                    {"bubble_fraction", r.simulation.bubble_fraction},
                    {"span_bubble_fraction", r.simulation.span_bubble_fraction},
                    {"exposed_reduce_us", r.simulation.exposed_reduce_us},
                    {"reduce_us", r.simulation.max_rank_reduce_us},
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
        {{"schedule", s.schedule}, {"stages_per_rank", s.stages_per_rank}, {"reason", s.reason}});
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
