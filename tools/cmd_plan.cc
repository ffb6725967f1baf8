// jitpipe plan FILE --model MODEL: per-rank memory of a lowered schedule.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_units.h"
#include "base/json_document.h"
#include "memory/memory_plan.h"
#include "scheduler/ir/model.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "memory/plan_every_rank.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/memory_report.h"
#include "tools/model_input.h"
#include "stages/predict/predict.h"
#include "planning/pytorch_memory.h"
#include "traces/chrome_trace_writer.h"
#include "traces/planned_timeline.h"
#include "traces/timeline_trace.h"

ABSL_FLAG(std::string, policy, "jit",
          "memory policy: jit (receive buffers at their RECV, sent outputs freed when sent) or "
          "eager (PyTorch's released runtime: everything received or sent held all step)");
ABSL_FLAG(int, prefetch, 0,
          "jit only: allocate each receive buffer this many compute actions before its consumer");
ABSL_FLAG(double, arena_slack, jitpipe::kDefaultArenaSlack,
          "stop the arena search at a layout within this fraction of the peak (0: search every "
          "ordering unless one reaches the peak); the receive arena's search too");
ABSL_FLAG(std::string, send_completion, "post",
          "when a send completes, for freeing its buffer: post (when posted: in-process copy, "
          "eager sends) or receive (rendezvous, MPI and NCCL: the buffer is held until the first "
          "action that the program orders after the peer's matching receive, an upper bound)");
ABSL_FLAG(int, map, -1, "also print this rank's buffers and an ASCII map of its arena");

namespace jitpipe::cli {
namespace {

using Json = nlohmann::ordered_json;
using RankRow = RankPlanSummary;

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 1.0; }

absl::StatusOr<PlanOptions> OptionsFromFlags() {
  PlanOptions options;
  const std::string policy = absl::GetFlag(FLAGS_policy);
  absl::StatusOr<MemoryPolicy> parsed = ParseMemoryPolicy(policy);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--policy must be jit or eager, not \"", policy, "\""));
  }
  options.policy = *parsed;
  options.prefetch = absl::GetFlag(FLAGS_prefetch);
  options.arena_slack = absl::GetFlag(FLAGS_arena_slack);
  absl::StatusOr<SendCompletionModel> send =
      ParseSendCompletionModel(absl::GetFlag(FLAGS_send_completion));
  if (!send.ok()) return send.status();
  options.send_completion = *send;
  if (absl::Status valid = ValidatePlanOptions(options); !valid.ok()) return valid;
  return options;
}

const RankRow& WorstRank(const std::vector<RankRow>& rows) {
  return *std::max_element(rows.begin(), rows.end(), [](const RankRow& a, const RankRow& b) {
    return a.peak < b.peak;  // the first rank on a tie
  });
}

void PrintTable(const std::string& path, const PlanOptions& options,
                const std::vector<RankRow>& rows) {
  std::printf("%s: %zu ranks; arena under policy %s%s\n", path.c_str(), rows.size(),
              std::string(MemoryPolicyName(options.policy)).c_str(),
              options.prefetch > 0
                  ? absl::StrCat("; jit peak with prefetch ", options.prefetch).c_str()
                  : "");
  if (options.send_completion == SendCompletionModel::kReceive) {
    std::printf("sends complete at the peer's receive: each sent buffer held to the first action "
                "after it (a bound); peak had they completed when posted:");
    for (const RankRow& r : rows) std::printf(" %s", FormatBytes(r.post_peak).c_str());
    std::printf("\n");
  }
  std::printf("%4s %12s %12s %9s %12s %12s %10s\n", "rank", "jit peak", "eager peak",
              "jit/eager", "lower bound", "arena", "arena/peak");
  for (const RankRow& r : rows) {
    std::printf("%4d %12s %12s %9.3f %12s %12s %10.3f\n", r.rank, FormatBytes(r.jit_peak).c_str(),
                FormatBytes(r.eager_peak).c_str(), Ratio(r.jit_peak, r.eager_peak),
                FormatBytes(r.lower_bound).c_str(), FormatBytes(r.arena).c_str(),
                Ratio(r.arena, r.peak));
  }
  const RankRow& worst = WorstRank(rows);
  if (worst.peak_index < 0) {
    std::printf("worst peak: none (no buffer holds any bytes)\n");
    return;
  }
  const std::string exact = worst.peak >= 1024 ? absl::StrCat(" (", worst.peak, " B)") : "";
  std::printf("worst peak: rank %d, %s%s at index %d (%s)\n", worst.rank,
              FormatBytes(worst.peak).c_str(), exact.c_str(), worst.peak_index,
              worst.peak_action.c_str());
}

std::string PeakText(const std::optional<int64_t>& peak) {
  return peak.has_value() ? FormatBytes(*peak) : "-";
}

std::string PoolText(const PoolSize& size) {
  return absl::StrFormat("%4d %11s", size.slots, FormatBytes(size.bytes));
}

// The PyTorch-runtime table: receive pools, the receive arena against the
// best pool, and the jit peak under each send release policy.
void PrintPyTorchTable(const PyTorchMemory& m, int asked_budget) {
  std::printf(
      "PyTorch's runtime: receive pools per stage and direction (A), per direction (B), per "
      "rank (C), in slots and bytes; the receives in one arena; the jit peak with sent "
      "buffers released at the step end (drain), once sent (poll), at _add_wait_send's waits "
      "(wait-send), under send budget %d%s\n",
      m.send_budget > 0 ? m.send_budget : asked_budget,
      m.send_budget > asked_budget ? absl::StrCat(" (", asked_budget, " cannot be kept)").c_str()
                                   : "");
  std::printf("%4s %16s %16s %16s %11s %10s %12s %12s %12s %12s\n", "rank", "A", "B", "C",
              "recv arena", "arena/best", "drain peak", "poll peak", "wait-send", "budget");
  PoolSize a, b, c;
  int64_t arena = 0;
  for (const PyTorchMemoryRank& r : m.ranks) {
    const RecvPools& p = r.pools;
    std::printf("%4d %16s %16s %16s %11s %10.3f %12s %12s %12s %12s\n", r.rank,
                PoolText(p.stage_direction).c_str(), PoolText(p.direction).c_str(),
                PoolText(p.rank_pool).c_str(), FormatBytes(p.arena_bytes).c_str(),
                Ratio(p.arena_bytes, p.best_pool_bytes()), FormatBytes(r.peaks.drain).c_str(),
                FormatBytes(r.peaks.poll).c_str(), PeakText(r.peaks.wait_send).c_str(),
                PeakText(r.peaks.budget).c_str());
    a = {a.slots + p.stage_direction.slots, a.bytes + p.stage_direction.bytes};
    b = {b.slots + p.direction.slots, b.bytes + p.direction.bytes};
    c = {c.slots + p.rank_pool.slots, c.bytes + p.rank_pool.bytes};
    arena += p.arena_bytes;
  }
  std::printf("%4s %16s %16s %16s %11s %10.3f\n", "sum", PoolText(a).c_str(), PoolText(b).c_str(),
              PoolText(c).c_str(), FormatBytes(arena).c_str(),
              Ratio(arena, std::min({a.bytes, b.bytes, c.bytes})));
  if (!m.wait_send_error.empty()) std::printf("wait-send: %s\n", m.wait_send_error.c_str());
  if (!m.budget_error.empty()) std::printf("budget: %s\n", m.budget_error.c_str());
}

Json PoolJson(const PoolSize& size) { return Json{{"slots", size.slots}, {"bytes", size.bytes}}; }

Json OptionalJson(const std::optional<int64_t>& value) {
  return value.has_value() ? Json(*value) : Json(nullptr);
}

// The same as JSON: one object per rank, in rank order.
Json PyTorchJson(const PyTorchMemory& m) {
  Json ranks = Json::array();
  for (const PyTorchMemoryRank& r : m.ranks) {
    const RecvPools& p = r.pools;
    Json stages = Json::array();
    for (const StagePool& sp : p.per_stage) {
      stages.push_back({{"stage", sp.stage},
                        {"direction", RecvDirectionName(sp.direction)},
                        {"slots", sp.size.slots},
                        {"bytes", sp.size.bytes}});
    }
    ranks.push_back({{"rank", r.rank},
                     {"receives", p.receives},
                     {"pool_per_stage_direction", PoolJson(p.stage_direction)},
                     {"pools_per_stage_direction", std::move(stages)},
                     {"pool_per_direction", PoolJson(p.direction)},
                     {"pool_forward", PoolJson(p.forward)},
                     {"pool_backward", PoolJson(p.backward)},
                     {"pool_per_rank", PoolJson(p.rank_pool)},
                     {"recv_arena_bytes", p.arena_bytes},
                     {"peak_drain_bytes", r.peaks.drain},
                     {"peak_poll_bytes", r.peaks.poll},
                     {"peak_wait_send_bytes", OptionalJson(r.peaks.wait_send)},
                     {"peak_budget_bytes", OptionalJson(r.peaks.budget)}});
  }
  return Json{{"send_budget", m.send_budget},
              {"wait_send_error", m.wait_send_error},
              {"budget_error", m.budget_error},
              {"ranks", std::move(ranks)}};
}

// `memory`: the all-of-it report of a version 2 model, printed after the
// planner's table (or as "memory" in --json); absent for version 1.
void PrintJson(const PlanOptions& options, const std::vector<RankRow>& rows,
               const PyTorchMemory& pytorch, const std::optional<MemoryReport>& memory) {
  Json ranks = Json::array();
  for (const RankRow& r : rows) {
    ranks.push_back({{"rank", r.rank},
                     {"peak_bytes", r.peak},
                     {"peak_index", r.peak_index},
                     {"peak_action", r.peak_action},
                     {"lower_bound_bytes", r.lower_bound},
                     {"arena_bytes", r.arena},
                     {"fragmentation_bytes", r.arena - r.peak},
                     {"arena_algorithm", r.arena_algorithm},
                     {"post_peak_bytes", r.post_peak},
                     {"jit_peak_bytes", r.jit_peak},
                     {"eager_peak_bytes", r.eager_peak},
                     {"buffers", r.buffers}});
  }
  Json out{{"policy", MemoryPolicyName(options.policy)},
           {"prefetch", options.prefetch},
           {"send_completion", SendCompletionModelName(options.send_completion)},
           {"ranks", std::move(ranks)},
           {"worst_rank", WorstRank(rows).rank},
           {"pytorch", PyTorchJson(pytorch)}};
  if (memory.has_value()) out["memory"] = MemoryJson(*memory);
  std::printf("%s\n", out.dump(1).c_str());
}

int RunPlan(const Command& command, const Invocation& invocation) {
  absl::StatusOr<PlanOptions> options = OptionsFromFlags();
  if (!options.ok()) return UsageError(command, options.status().message());
  absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
  if (!partition.ok()) return UsageError(command, partition.status().message());
  const int budget = invocation.IsSet("send_budget") ? absl::GetFlag(FLAGS_send_budget) : 1;
  if (budget < 1) {
    return UsageError(command, absl::StrCat("--send-budget must be at least 1, not ", budget));
  }
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (model_path.empty()) return UsageError(command, "--model MODEL is required");
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (!schedule->lowered) schedule = Lower(*schedule);  // jitpipe lower's defaults
  // A plan of a program that cannot run would be a number for nothing: the
  // same proof simulate, render and replay ask for (relaxed semantics).
  if (schedule.ok()) {
    if (absl::Status valid = Validate(*schedule); !valid.ok()) schedule = valid;
  }
  if (!schedule.ok()) {
    return Fail(command, absl::Status(schedule.status().code(),
                                      absl::StrCat(path, ": ", schedule.status().message())));
  }
  absl::StatusOr<StagedModel> staged = LoadModelForSchedule(model_path, *schedule, *partition);
  if (!staged.ok()) return Fail(command, staged.status());
  if (absl::Status device = ApplyDeviceFlags(staged->training.device); !device.ok()) {
    return UsageError(command, device.message());
  }
  const Model* model = &staged->model;
  const int map_rank = absl::GetFlag(FLAGS_map);
  if (map_rank >= schedule->pp) {
    return UsageError(command, absl::StrCat("--map ", map_rank, ": the schedule has ranks 0 to ",
                                            schedule->pp - 1));
  }

  std::optional<ChromeTraceWriter> trace;
  if (const std::string trace_path = absl::GetFlag(FLAGS_trace); !trace_path.empty()) {
    absl::StatusOr<ChromeTraceWriter> writer = ChromeTraceWriter::ToFile(trace_path);
    if (!writer.ok()) return Fail(command, writer.status());
    trace.emplace(*std::move(writer));
    trace->SetMetadata("source", path);
    trace->SetMetadata("policy", std::string(MemoryPolicyName(options->policy)));
  }
  // Ranks a batch at a time (memory/plan_every_rank.h): a plan of a big
  // schedule is dropped once its row, map and trace tracks are out.
  std::vector<RankRow> rows;
  rows.reserve(schedule->pp);
  std::string map;
  // With times in the model the trace shows simulated time (the plan's
  // buffers, kept for the simulation), else program index (the planned
  // timeline, a rank at a time).
  const bool simulated_trace = trace.has_value() && HasTimes(*model);
  std::vector<RankBuffers> buffers;
  Timeline planned;
  planned.axis = TimelineAxis::kProgramIndex;
  const absl::Status planned_all = PlanEveryRank(
      *schedule, *model, *options, /*threads=*/0,
      [&](const RankPlanSummary& row, RankMemoryPlan& plan) {
        rows.push_back(row);
        if (row.rank == map_rank) {
          map = absl::StrCat(plan.ToString(), MemoryMap(plan, schedule->ranks[row.rank]));
        }
        if (simulated_trace) {
          buffers.push_back(std::move(plan.buffers));
        } else if (trace.has_value()) {
          AppendPlannedRank(*schedule, plan, planned);
        }
        return absl::OkStatus();
      });
  if (!planned_all.ok()) {
    return Fail(command,
                absl::Status(planned_all.code(), absl::StrCat(path, ": ", planned_all.message())));
  }
  // A version 2 model: the parameters and optimizer state each rank holds
  // the whole step join the trace's counters (mem.live is then the rank's
  // total, as the all-of-it table below counts it).
  std::vector<ResidentMemory> resident;
  if (staged->layered) {
    for (const RankMemory& r : ResidentRankMemory(*schedule, *model, staged->training).ranks) {
      resident.push_back({r.rank, r.parameters, r.optimizer});
    }
  }
  if (simulated_trace) {
    absl::StatusOr<Prediction> p = SimulatePlanned(*schedule, *model, std::move(buffers), true);
    if (!p.ok()) {
      return Fail(command, absl::Status(p.status().code(),
                                        absl::StrCat(path, ": ", p.status().message())));
    }
    p->simulation.timeline.resident = resident;
    AddTimelineToTrace(p->lowered, p->simulation.timeline, *trace);
  } else if (trace.has_value()) {
    planned.resident = resident;
    AddTimelineToTrace(*schedule, planned, *trace);
  }
  if (trace.has_value()) {
    trace->SetMetadata("clock", simulated_trace ? "simulated" : "program index");
    if (absl::Status s = trace->Finish(); !s.ok()) return Fail(command, s);
  }
  absl::StatusOr<PyTorchMemory> pytorch = PlanPyTorchMemory(
      *schedule, *model, {.send_budget = budget, .arena_slack = options->arena_slack});
  if (!pytorch.ok()) {
    return Fail(command, absl::Status(pytorch.status().code(),
                                      absl::StrCat(path, ": ", pytorch.status().message())));
  }
  std::optional<MemoryReport> memory;
  if (staged->layered) {
    absl::StatusOr<MemoryReport> report =
        PlanRankMemories(*schedule, *model, staged->training, options->policy);
    if (!report.ok()) {
      return Fail(command, absl::Status(report.status().code(),
                                        absl::StrCat(path, ": ", report.status().message())));
    }
    memory = *std::move(report);
  }
  if (absl::GetFlag(FLAGS_json)) {
    PrintJson(*options, rows, *pytorch, memory);
  } else {
    PrintTable(path, *options, rows);
    PrintPyTorchTable(*pytorch, budget);
    if (memory.has_value()) {
      std::printf("\nmemory per rank, all of it (%s activations, %s cut; %s):\n%s%s\n",
                  std::string(MemoryPolicyName(options->policy)).c_str(), staged->how.c_str(),
                  TrainingSummary(*model, staged->training).c_str(),
                  MemoryTable(*memory).c_str(), HeaviestLine(*memory).c_str());
      std::printf("%s\n", CutLine(*staged).c_str());
    }
  }
  std::fputs(map.c_str(), stdout);
  return kExitOk;
}

}  // namespace

Command PlanCommand() {
  return Command{
      .name = "plan",
      .synopsis = "plan FILE --model MODEL [--policy jit|eager] [--prefetch K] "
                  "[--arena-slack F] [--send-completion post|receive] [--send-budget K] [--json] [--trace OUT] [--map RANK]",
      .summary = "Plan the memory of a schedule (a compute-only FILE is lowered first, as "
                 "jitpipe lower does by default). Per rank: the peak under --policy, "
                 "the jit and eager peaks side by side, the liveness lower bound (what any "
                 "placement of the receives must hold; with --send-completion receive, for a "
                 "rendezvous transport, each sent buffer is held until the first action the "
                 "program orders "
                 "after the peer's receive, and the peak had sends completed when posted is "
                 "printed too) and a static arena with an offset for "
                 "every buffer (64-byte aligned, best fit). --trace writes a Chrome trace with "
                 "a memory counter per rank and category: over simulated time when the model "
                 "gives compute times (the jitpipe simulate timeline, memory under --policy), "
                 "else over program index with the arena's high-water mark; --map prints one "
                 "rank's buffers and an ASCII map of its arena. Then what PyTorch main's "
                 "runtime would hold: its deterministic receive pool per stage and direction, "
                 "per direction and per rank (slots and bytes), the same receive buffers in one "
                 "arena, and the jit peak when sent buffers are released at the step end, once "
                 "sent, at _add_wait_send's waits or under --send-budget K (default 1; the "
                 "smallest budget the program's receive placement keeps is used). With a "
                 "version 2 (layered) MODEL, cut into the schedule's stages (even, --layout or "
                 "--partition balanced), it also prints each rank's memory, all of it: "
                 "parameters, gradients, optimizer state, activations and buffers (the "
                 "planner's peak), the total against the device limit, and the heaviest rank "
                 "with how much it fits or misses by.",
      .flags = {"model", "layout", "partition", "time_budget", "policy", "prefetch", "arena_slack",
                "send_completion",                 "send_budget", "memory_limit", "reserve", "json", "trace", "map",
                "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunPlan,
  };
}

}  // namespace jitpipe::cli
