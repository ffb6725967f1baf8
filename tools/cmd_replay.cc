// jitpipe replay FILE --backend inproc --stage mlp|cost: runs a schedule for
// real and reports what was measured.
//
// A compute-only FILE is lowered first (LowerForReplay: the default lowering
// with REDUCE_GRAD). The program is validated, planned under --policy and
// run for --steps steps over pp x --dp ranks (runtime/replay.h).
// stdout: the loss, the step time, each rank's peak memory measured vs
// planned, the transport's staged bytes and the measured exposed reduction;
// with --stage mlp also the check against the unpipelined reference trainer
// (exit 1 when the loss or any gradient differs by more than 1e-5
// relative); --stage transformer the same on inproc (fp32) and, on cuda, the
// bf16 stage in the device module within the bf16 tolerances
// (cuda_transformer_stage.h), unless --reference-check=false. --json
// prints the same as one JSON object. --trace writes the
// measured timeline as a Chrome trace. A replay that fails (a stage error,
// a timeout) exits 1 with the root failure and, for a timeout, the flight
// analysis; --flight-dir keeps every rank's flight record.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "comm/backend_traits.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model.h"
#include "scheduler/ir/model_file.h"
#include "stages/reference/cost_stage.h"
#include "stages/reference/cuda_transformer_stage.h"
#include "runtime/replay.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay_plan.h"
#include "tools/commands.h"
#include "runtime/gpu/replay.h"
#include "tools/common_flags.h"
#include "tools/model_input.h"
#include "tools/replay_transformer.h"
#include "tools/calibration_report.h"
#include "runtime/stage_call_times.h"
#include "tools/transformer_flags.h"
#include "traces/chrome_trace_writer.h"
#include "traces/timeline_trace.h"
#include "comm/launched_process.h"
#include "comm/world_plugin.h"
#include "stages/reference/mlp_gradients.h"

ABSL_DECLARE_FLAG(std::string, policy);  // cmd_plan.cc: jit | eager

ABSL_FLAG(std::string, backend, "inproc",
          "where ranks run: inproc (threads of this process); mpi (processes); cuda (every rank "
          "a set of streams on one GPU), nccl or nccl-lazy (a process and a GPU per rank) when "
          "built in");
ABSL_FLAG(std::string, stage, "",
          "the stages: mlp (an exact MLP, checked against a reference trainer), cost (spends "
          "the model's times and moves its byte sizes; needs --model) or transformer (a "
          "decoder-only transformer, fp32 in process (inproc) and bf16 on a GPU (cuda), checked "
          "against a reference trainer; needs --model from `jitpipe model` and the shape flags "
          "it was written with)");
ABSL_FLAG(int, steps, 1, "training steps to run");
ABSL_FLAG(int, dp, 0, "data-parallel replicas (pp x dp ranks); default: the model's dp.size, else 1");
ABSL_FLAG(double, timeout, 60, "seconds any wait may take before the run fails");
ABSL_FLAG(std::string, flight_dir, "",
          "on failure every rank writes its flight record here (rank_<r>.json)");
ABSL_FLAG(bool, measure_costs, false,
          "device backends: time every stage call on the device and report each stage's mean "
          "forward, backward-input, backward-weight and backward times (--json: device_costs), "
          "the costs to simulate with");
ABSL_FLAG(bool, reference_check, true,
          "--stage transformer: check the replayed step against the unpipelined fp32 reference "
          "trainer on the CPU (--reference-check=false skips it: at a real size the reference "
          "is hundreds of TFLOPs)");
ABSL_FLAG(bool, graph, false,
          "--backend cuda with --stage mlp or transformer, --buffers arena and --dp 1: after "
          "the replay, run "
          "--steps eager steps from one thread, capture one step as a CUDA graph, replay it "
          "--steps times, and report the host time per step of both and the check of the "
          "replayed step");
ABSL_FLAG(std::string, buffers, "tracked",
          "buffer provider: tracked (a heap allocation per buffer, measured peak) or arena (the "
          "plan's arena, no allocation per buffer)");

namespace jitpipe::cli {
namespace {

constexpr double kMlpTolerance = 1e-5;

// JITPIPE_HAVE_MPI: whether this build has the MPI backend's module
// (tools/CMakeLists.txt); JITPIPE_HAVE_CUDA: set by jitpipe::comm_cuda
// (comm/CMakeLists.txt).
constexpr bool kHaveMpi = JITPIPE_HAVE_MPI != 0;
constexpr bool kHaveCuda = JITPIPE_HAVE_CUDA != 0;

struct ReplayFlags {
  std::string backend;  // inproc | mpi | cuda | nccl | nccl-lazy
  BackendTraits traits;  // comm/backend_traits.h
  std::string stage;
  int steps = 1;
  int dp = 1;
  MemoryPolicy policy = MemoryPolicy::kJit;
  bool measure_costs = false;
  bool graph = false;
  bool reference_check = true;
  // The check's relative tolerances: the exact fp32 stages' (kMlpTolerance),
  // the bf16 transformer's on cuda (cuda_transformer_stage.h).
  double loss_tolerance = kMlpTolerance;
  double grad_tolerance = kMlpTolerance;
  ReplayOptions run;
};

bool Passes(const MlpComparison& c, const ReplayFlags& f) {
  return c.loss_error <= f.loss_tolerance && c.worst_grad_error <= f.grad_tolerance;
}

std::string Tolerances(const ReplayFlags& f) {
  return f.loss_tolerance == f.grad_tolerance
             ? absl::StrCat(f.grad_tolerance, " relative")
             : absl::StrCat(f.loss_tolerance, " (loss) and ", f.grad_tolerance,
                            " (gradients) relative");
}

// The flags checked; InvalidArgument with the usage error otherwise.
absl::StatusOr<ReplayFlags> FlagsFromCommandLine(const Invocation& invocation,
                                                 const std::optional<Model>& model) {
  ReplayFlags f;
  const std::string backend = absl::GetFlag(FLAGS_backend);
  // The device backends are checked when they start (no device, no CUDA in
  // this build: exit 1 with "no CUDA device").
  if (backend == "mpi" && !kHaveMpi) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend ", backend, " is not available in this build"));
  }
  f.backend = backend;
  ASSIGN_OR_RETURN(f.traits, BackendTraitsOf(backend));
  f.stage = absl::GetFlag(FLAGS_stage);
  if (f.stage != "mlp" && f.stage != "cost" && f.stage != "transformer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage must be mlp, cost or transformer", f.stage.empty() ? "" : ", not \"",
                     f.stage, f.stage.empty() ? "" : "\""));
  }
  if ((f.stage == "cost" || f.stage == "transformer") && !model.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("--stage ", f.stage, " needs --model MODEL"));
  }
  if (f.stage == "transformer" && backend != "inproc" && backend != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stage transformer runs on --backend inproc (fp32) or cuda (bf16), not ", backend));
  }
  if (f.stage == "transformer" && backend == "cuda") {
    f.loss_tolerance = kCudaTransformerBf16LossTolerance;
    f.grad_tolerance = kCudaTransformerBf16Tolerance;
  }
  f.reference_check = absl::GetFlag(FLAGS_reference_check);
  if (!f.reference_check && f.stage != "transformer") {
    return absl::InvalidArgumentError("--reference-check=false is for --stage transformer only");
  }
  f.steps = absl::GetFlag(FLAGS_steps);
  f.dp = invocation.IsSet("dp") ? absl::GetFlag(FLAGS_dp) : model ? model->dp.size : 1;
  const double timeout = absl::GetFlag(FLAGS_timeout);
  if (f.steps < 1) return absl::InvalidArgumentError("--steps must be 1 or more");
  if (f.dp < 1) return absl::InvalidArgumentError("--dp must be 1 or more");
  if (!(timeout > 0)) return absl::InvalidArgumentError("--timeout must be a positive number of seconds");
  absl::StatusOr<MemoryPolicy> policy = ParseMemoryPolicy(absl::GetFlag(FLAGS_policy));
  if (!policy.ok()) return absl::InvalidArgumentError("--policy must be jit or eager");
  f.policy = *policy;
  const std::string buffers = absl::GetFlag(FLAGS_buffers);
  if (buffers != "tracked" && buffers != "arena") {
    return absl::InvalidArgumentError("--buffers must be tracked or arena");
  }
  f.measure_costs = absl::GetFlag(FLAGS_measure_costs);
  if (f.measure_costs && !f.traits.device) {
    return absl::InvalidArgumentError("--measure-costs needs a device backend (cuda, nccl, nccl-lazy)");
  }
  f.graph = absl::GetFlag(FLAGS_graph);
  if (f.graph && (f.backend != "cuda" || (f.stage != "mlp" && f.stage != "transformer") ||
                  buffers != "arena" || f.dp != 1)) {
    return absl::InvalidArgumentError(
        "--graph needs --backend cuda, --stage mlp or transformer, --buffers arena and --dp 1");
  }
  f.run.dp = f.dp;
  f.run.steps = f.steps;
  f.run.buffers = buffers == "arena" ? BufferMode::kArena : BufferMode::kTracked;
  f.run.timeout = absl::Seconds(timeout);
  f.run.flight_dir = absl::GetFlag(FLAGS_flight_dir);
  // On the host backends the timeline also gives each stage's call times
  // (runtime/stage_call_times.h); a device backend's spans time the
  // enqueueing, not the work (--measure-costs times that).
  f.run.record_timeline = !absl::GetFlag(FLAGS_trace).empty() || !f.traits.device;
  return f;
}

// The reference mlp of `jitpipe replay --stage mlp`.
MlpOptions CliMlp() {
  MlpOptions options;
  options.shape = MlpShape{32, 8, 2};
  options.seed = 1;
  return options;
}

// A progress bar on stderr, drawn only on a terminal and once the replay
// has run for half a second (short replays print nothing).
class ProgressBar {
 public:
  explicit ProgressBar(int steps)
      : steps_(steps), enabled_(isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {}
  void Update(int done) {
    if (!enabled_ || std::chrono::steady_clock::now() - start_ < std::chrono::milliseconds(500)) {
      return;
    }
    const int width = 30, filled = done * width / steps_;
    std::fprintf(stderr, "\rreplay [%s%s] step %d/%d", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), done, steps_);
    drawn_ = true;
  }
  ~ProgressBar() { Clear(); }
  // Erases the bar (before a message on stderr).
  void Clear() {
    if (drawn_) std::fputs("\r\033[K", stderr);
    drawn_ = false;
  }

 private:
  const int steps_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  bool drawn_ = false;
};

// Each stage's host time per call (host backends), with what it was
// measured on: the cut of a version 2 model, the transformer's shape.
struct StageTimesReport {
  std::vector<StageCallTimes> times;
  int skipped_steps = 0;  // the first step, when there are several: first touches
  std::optional<Partition> partition;
  std::optional<TransformerShape> shape;
};

std::string Bytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < (int64_t{1} << 20)) return absl::StrFormat("%.2f KiB", bytes / 1024.0);
  return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
}

void PrintText(const std::string& path, const ReplayFlags& f, const ReplayPlan& plan,
               const ReplayResult& r, const std::optional<MlpComparison>& check,
               const std::vector<gpu::MeasuredStageCosts>& costs,
               const std::optional<gpu::GraphStepsReport>& graph,
               const std::optional<StageTimesReport>& stage_times) {
  const Schedule& s = plan.schedule;
  std::printf("%s: replayed %d step%s of pp %d x dp %d (%d stages, %d microbatches, %zu actions) "
              "with %s stages, %s backend, %s memory\n",
              path.c_str(), f.steps, f.steps == 1 ? "" : "s", s.pp, f.dp, s.num_stages(),
              s.microbatches, s.TotalActions(), f.stage.c_str(), f.backend.c_str(),
              std::string(MemoryPolicyName(f.policy)).c_str());
  std::vector<std::string> losses;
  for (double l : r.step_loss) losses.push_back(absl::StrFormat("%.9g", l));
  std::printf("loss: %s\n", absl::StrJoin(losses, " ").c_str());
  if (check.has_value()) {
    std::printf("check against the reference trainer: %s; %s\n",
                Passes(*check, f) ? "ok" : "FAILED", check->ToString().c_str());
  } else if (!f.reference_check) {
    std::printf("check against the reference trainer: not run (--reference-check=false)\n");
  }
  auto [lo, hi] = std::minmax_element(r.step_us.begin(), r.step_us.end());
  std::printf("step time: %.1f us (median of %d; min %.1f, max %.1f)\n", r.median_step_us(),
              f.steps, *lo, *hi);
  std::printf("exposed reduction: %.1f us (median over steps of the longest end-of-step wait "
              "for gradient reductions)\n", r.exposed_reduce_us);
  // A device backend's allocator measures its own peak (the memory pool's
  // high-water mark; the slab with arena buffers).
  const bool device = f.traits.device;
  std::printf("%6s %5s %7s %14s %14s %14s%s\n", "rank", "pp", "replica", "peak measured",
              "peak planned", "arena", device ? "      pool peak" : "");
  for (const RankReplay& rank : r.ranks) {
    std::printf("%6d %5d %7d %14s %14s %14s", rank.world_rank, rank.rank, rank.replica,
                Bytes(rank.measured_peak_bytes).c_str(), Bytes(rank.planned_peak_bytes).c_str(),
                Bytes(rank.arena_bytes).c_str());
    if (device) std::printf(" %14s", Bytes(rank.allocator_peak_bytes).c_str());
    std::printf("\n");
  }
  if (PlanSendCompletion(f.traits) == SendCompletionModel::kReceive) {
    // "peak planned" is the bound: a sent buffer held until the first
    // action after its peer's receive (plan --send-completion receive).
    bool above = false, differs = false;
    for (const RankReplay& rank : r.ranks) {
      above = above || rank.measured_peak_bytes > rank.planned_peak_bytes;
      differs = differs || rank.planned_post_peak_bytes != rank.planned_peak_bytes;
    }
    std::printf("note: over %s a send completes once its receive is posted, so the plan holds a "
                "sent buffer until the first action that follows the peer's receive: \"peak "
                "planned\" is that bound (plan --send-completion receive), which the measured peak "
                "may not exceed%s\n",
                f.backend.c_str(), above ? " -- IT EXCEEDS THE BOUND ABOVE" : "");
    if (differs) {
      std::printf("%6s %14s %14s %14s\n", "rank", "planned post", "planned bound", "measured");
      for (const RankReplay& rank : r.ranks) {
        std::printf("%6d %14s %14s %14s\n", rank.world_rank,
                    Bytes(rank.planned_post_peak_bytes).c_str(),
                    Bytes(rank.planned_peak_bytes).c_str(),
                    Bytes(rank.measured_peak_bytes).c_str());
      }
    } else {
      std::printf("planned post = planned bound on every rank\n");
    }
  }
  if (f.backend == "inproc") {  // Open MPI buffers eager sends itself: unmeasured
    std::printf("transport in flight: peak %s (sends staged until their receive was posted)\n",
                Bytes(r.peak_in_flight_bytes).c_str());
  }
  if (graph.has_value()) {
    std::printf("CUDA graph (%zu nodes): step host time %.1f us eager, %.1f us graph replay "
                "(median of %d each); replayed step vs the reference trainer: %s%s%s\n",
                graph->nodes, graph->eager_host_us, graph->graph_host_us, graph->steps,
                !graph->check ? "not run" : Passes(*graph->check, f) ? "ok" : "FAILED",
                graph->check ? "; " : "",
                graph->check ? graph->check->ToString().c_str() : "");
  }
  if (stage_times.has_value()) {
    for (const StageCallTimes& c : stage_times->times) {
      std::printf("stage %d host time per call: F %.1f us, I %.1f us, W %.1f us, B %.1f us%s\n",
                  c.stage, c.forward_us, c.backward_input_us, c.backward_weight_us,
                  c.backward_us,
                  stage_times->skipped_steps > 0 ? " (steps after the first)" : "");
    }
  }
  for (const gpu::MeasuredStageCosts& c : costs) {
    std::printf("stage %d device time per call: F %.1f us, I %.1f us, W %.1f us, B %.1f us\n",
                c.stage, c.forward_us, c.backward_input_us, c.backward_weight_us, c.backward_us);
  }
}

using Json = nlohmann::ordered_json;

void PrintJson(const ReplayFlags& f, const ReplayPlan& plan, const ReplayResult& r,
               const std::optional<MlpComparison>& check,
               const std::vector<gpu::MeasuredStageCosts>& costs,
               const std::optional<gpu::GraphStepsReport>& graph,
               const std::optional<StageTimesReport>& stage_times) {
  Json ranks = Json::array();
  for (const RankReplay& k : r.ranks) {
    ranks.push_back({{"rank", k.world_rank},
                     {"pipeline_rank", k.rank},
                     {"replica", k.replica},
                     {"measured_peak_bytes", k.measured_peak_bytes},
                     {"planned_peak_bytes", k.planned_peak_bytes},
                     {"planned_post_peak_bytes", k.planned_post_peak_bytes},
                     {"arena_bytes", k.arena_bytes},
                     {"allocator_peak_bytes", k.allocator_peak_bytes},
                     {"exposed_reduce_us", k.exposed_reduce_us}});
  }
  Json out{{"backend", f.backend},
           {"stage", f.stage},
           {"policy", MemoryPolicyName(f.policy)},
           {"pp", plan.schedule.pp},
           {"dp", f.dp},
           {"steps", f.steps},
           {"loss", r.step_loss.back()},
           {"step_loss", r.step_loss},
           {"step_us", r.median_step_us()},
           {"step_us_all", r.step_us},
           {"exposed_reduce_us", r.exposed_reduce_us},
           {"peak_in_flight_bytes", r.peak_in_flight_bytes},
           {"ranks", std::move(ranks)}};
  if (graph.has_value()) {
    out["graph"] = {{"steps", graph->steps},
                    {"nodes", graph->nodes},
                    {"eager_host_us", graph->eager_host_us},
                    {"graph_host_us", graph->graph_host_us},
                    {"eager_loss", graph->eager_loss},
                    {"graph_loss", graph->graph_loss},
                    {"ok", !graph->check || Passes(*graph->check, f)},
                    {"checked", graph->check.has_value()},
                    {"worst_grad_error", graph->check ? graph->check->worst_grad_error : 0.0}};
  }
  if (f.measure_costs) {
    Json list = Json::array();
    for (const gpu::MeasuredStageCosts& c : costs) {
      list.push_back({{"stage", c.stage},
                      {"forward_us", c.forward_us},
                      {"backward_input_us", c.backward_input_us},
                      {"backward_weight_us", c.backward_weight_us},
                      {"backward_us", c.backward_us}});
    }
    out["device_costs"] = std::move(list);
  }
  if (stage_times.has_value()) {
    out["stage_times"] = StageTimesJson(stage_times->times, stage_times->partition,
                                        stage_times->skipped_steps,
                                        f.steps - stage_times->skipped_steps);
    if (stage_times->partition.has_value()) {
      out["partition"] = stage_times->partition->boundaries;
    }
    if (stage_times->shape.has_value()) {
      out["transformer_shape"] = TransformerShapeJson(*stage_times->shape);
    }
  }
  if (check.has_value()) {
    out["check"] = {{"ok", Passes(*check, f)},
                    {"tolerance", f.grad_tolerance},
                    {"loss_tolerance", f.loss_tolerance},
                    {"reference_loss", check->reference_loss},
                    {"loss_error", check->loss_error},
                    {"worst_grad_error", check->worst_grad_error},
                    {"worst_block", check->worst_block},
                    {"worst_replica", check->worst_replica}};
  }
  std::printf("%s\n", out.dump(1).c_str());
}

absl::Status WriteTrace(const std::string& path, const std::string& source, const ReplayFlags& f,
                        const ReplayPlan& plan, const ReplayResult& r) {
  ASSIGN_OR_RETURN(ChromeTraceWriter writer, ChromeTraceWriter::ToFile(path));
  writer.SetMetadata("source", source);
  writer.SetMetadata("kind", "measured");
  writer.SetMetadata("backend", f.backend);
  writer.SetMetadata("stage", f.stage);
  writer.SetMetadata("policy", std::string(MemoryPolicyName(f.policy)));
  writer.SetMetadata("steps", f.steps);
  writer.SetMetadata("step_us", r.median_step_us());
  AddTimelineToTrace(plan.schedule, r.timeline, writer);
  return writer.Finish();
}

// The worst of every step's check (the steps are identical: same
// parameters, same data), or nullopt for the cost stage. `transformer`: the
// transformer stage's check, else the mlp's (when `mlp` is set).
absl::StatusOr<std::optional<MlpComparison>> CheckMlp(const ReplayResult& r,
                                                      const MlpStageFactory* mlp,
                                                      const TransformerReplay* transformer,
                                                      const Model& model) {
  if (mlp == nullptr && transformer == nullptr) return std::optional<MlpComparison>();
  std::optional<MlpReference> reference;
  if (mlp != nullptr) reference = RunMlpReference(mlp->options(), mlp->layout());
  std::optional<MlpComparison> worst;
  for (double loss : r.step_loss) {
    ASSIGN_OR_RETURN(MlpComparison c,
                     mlp != nullptr
                         ? CompareWithReference(*reference, loss, *mlp, model.dp.reduce)
                         : transformer->check(loss, model.dp.reduce));
    if (!worst || c.loss_error > worst->loss_error) worst = c;
  }
  return worst;
}

int RunReplay(const Command& command, const Invocation& invocation) {
  // Every transport and recorder operation takes a mutex; abseil's deadlock
  // detection (on in this abseil build) would cost each one a graph lookup.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A model of either version: a version 2 one (layers) is staged for the
  // schedule below, with --layout / --partition, as plan and simulate do.
  std::optional<ModelFile> file;
  std::optional<Model> model;
  std::optional<Partition> partition_used;  // a version 2 model's cut  // its dp settings now, its stage costs once staged
  // A process of an MPI job that cannot read its files fails before the
  // world starts; only its own line reaches the user, so it names its rank
  // and host (a file missing on one host of many).
  auto unread = [](const absl::Status& s) {
    const std::string backend = absl::GetFlag(FLAGS_backend);
    const std::optional<LaunchedProcess> me =
        backend == "inproc" || backend == "cuda" ? std::nullopt : ThisLaunchedProcess();
    if (!me.has_value()) return s;
    return absl::Status(s.code(), absl::StrCat(me->ToString(), ": ", s.message()));
  };
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (!model_path.empty()) {
    absl::StatusOr<ModelFile> loaded = LoadModelFile(model_path, MaxInputBytes());
    if (!loaded.ok()) return Fail(command, unread(loaded.status()));
    file = *std::move(loaded);
    model = file->layered() ? Model() : file->stages;
    if (file->layered()) model->dp = file->layers.dp;
  }
  absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
  if (!partition.ok()) return UsageError(command, partition.status().message());
  absl::StatusOr<ReplayFlags> flags = FlagsFromCommandLine(invocation, model);
  if (!flags.ok()) return UsageError(command, flags.status().message());
  ReplayFlags& f = *flags;
  const std::string& path = invocation.positional[0];
  auto in_file = [&path](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  };
  absl::StatusOr<Schedule> input = LoadInputSchedule(path);
  if (!input.ok()) return Fail(command, unread(input.status()));
  if (absl::Status world = CheckReplayWorld(input->pp, f.dp); !world.ok()) {
    return UsageError(command, world.message());
  }
  if (file.has_value()) {
    absl::StatusOr<StagedModel> staged = ModelForSchedule(*file, *input, *partition);
    if (!staged.ok()) {
      return Fail(command, absl::Status(staged.status().code(),
                                        absl::StrCat(model_path, ": ", staged.status().message())));
    }
    model = std::move(staged->model);
    partition_used = staged->partition;
  }
  // Receives placed as the backend needs (runtime/replay_plan.h).
  absl::StatusOr<Schedule> lowered = LowerForBackend(*input, f.traits, f.run.buffers);
  if (!lowered.ok()) return Fail(command, in_file(lowered.status()));
  Model base = model.value_or(Model());
  base.dp.size = f.dp;
  f.run.reduce = base.dp.reduce;

  std::unique_ptr<StageFactory> factory;
  MlpStageFactory* mlp = nullptr;
  if (f.stage == "mlp") {
    auto owned = std::make_unique<MlpStageFactory>(CliMlp(), MlpLayout::Of(*lowered, f.dp));
    mlp = owned.get();
    absl::StatusOr<Model> sized = ModelWithStageSizes(base, lowered->num_stages(), *owned);
    if (!sized.ok()) return Fail(command, in_file(sized.status()));
    base = *std::move(sized);
    factory = std::move(owned);
  }
  std::optional<TransformerReplay> transformer;
  std::optional<TransformerShape> transformer_shape;
  if (f.stage == "transformer") {
    if (!partition_used.has_value()) {
      return UsageError(command, absl::StrCat("--stage transformer needs a version 2 model (`jitpipe "
                                              "model`); ", model_path, " is version 1"));
    }
    absl::StatusOr<TransformerShape> shape = TransformerShapeFromFlags(/*tflops=*/1.0);
    if (!shape.ok()) return UsageError(command, shape.status().message());
    const TransformerTarget target =
        f.backend == "cuda" ? TransformerTarget::kCuda : TransformerTarget::kHost;
    absl::StatusOr<TransformerReplay> made = MakeTransformerReplay(
        model_path, *shape, file->layers, *partition_used, *lowered, f.dp, target);
    if (!made.ok()) {
      if (made.status().code() == absl::StatusCode::kInvalidArgument) {
        return UsageError(command, made.status().message());
      }
      return Fail(command, made.status());
    }
    transformer = *std::move(made);
    transformer_shape = *shape;
    // On cuda the staged model's sizes stand (the flags' bf16 model's, layer
    // by layer); the module checks them against the device stage's.
    if (target == TransformerTarget::kHost) {
      absl::StatusOr<Model> sized =
          ModelWithStageSizes(base, lowered->num_stages(), *transformer->factory);
      if (!sized.ok()) return Fail(command, in_file(sized.status()));
      base = *std::move(sized);
      factory = std::move(transformer->factory);
    }
  }
  absl::StatusOr<ReplayPlan> plan =
      PlanReplay(*std::move(lowered), base, f.policy, PlanSendCompletion(f.traits));
  if (!plan.ok()) return Fail(command, in_file(plan.status()));
  const bool device_transformer = transformer.has_value() && f.backend == "cuda";
  if (factory == nullptr && !device_transformer) {
    factory = std::make_unique<CostStageFactory>(plan->schedule, plan->model);
  }

  ProgressBar bar(f.steps);
  f.run.on_step = [&bar](int done) { bar.Update(done); };
  // A rank stuck in a stage call holds its thread forever: the report is
  // printed and the process ends here, without the destructors that would
  // wait for that thread.
  f.run.on_stuck = [&](const absl::Status& report, World& world) {
    bar.Clear();
    Fail(command, in_file(report));
    std::fflush(nullptr);
    world.LeaveBeforeExit();
    std::_Exit(kExitFailure);
  };
  absl::StatusOr<ReplayResult> result;
  // --backend mpi: this process is one world rank of `mpirun -np pp*dp`
  // (runtime/replay.h); world rank 0 reports, the others only fail. The
  // world comes from the backend's module (comm/world_plugin.h): only this
  // command, with this flag, loads Open MPI.
  std::unique_ptr<World> mpi;
  if (f.backend == "mpi") {
    absl::StatusOr<std::unique_ptr<World>> started = LoadWorld("mpi");
    if (!started.ok()) return Fail(command, started.status());
    mpi = *std::move(started);
    result = jitpipe::RunReplay(plan->schedule, plan->executable, plan->plans, *factory, *mpi,
                                f.run);
    if (result.ok() && mlp != nullptr) {
      absl::Status gathered = GatherMlpGradients(plan->schedule, *mlp, *mpi, f.run.timeout);
      if (!gathered.ok()) result = gathered;
    }
    if (result.ok() && !mpi->is_root()) return kExitOk;
  }
  if (f.backend == "inproc") {
    result = RunInProcess(plan->schedule, plan->executable, plan->plans, *factory, f.run);
  }
  // A device backend (runtime/gpu/replay.h): the device check first, then the
  // module that has the CUDA, NCCL and cuBLAS code.
  std::optional<MlpComparison> device_check;
  std::vector<gpu::MeasuredStageCosts> costs;
  std::optional<gpu::GraphStepsReport> graph;
  if (f.traits.device) {
    if (!kHaveCuda) {
      return Fail(command, in_file(absl::UnavailableError(
                               "no CUDA device: this build has no CUDA backend (nvcc or the CUDA "
                               "toolkit was not found when it was configured)")));
    }
    gpu::GpuReplayRequest request;
    request.backend = f.backend;
    request.plan = &*plan;
    request.host_stages = factory.get();
    request.mlp = mlp;
    request.device_mlp = mlp != nullptr && f.backend == "cuda";
    if (transformer.has_value() && f.backend == "cuda") {
      request.transformer = &transformer->options;
      request.reference_check = f.reference_check;
    }
    request.measure_costs = f.measure_costs;
    request.graph = f.graph;
    request.options = f.run;
    absl::StatusOr<gpu::GpuReplayOutcome> outcome = gpu::RunGpuReplay(request);
    if (!outcome.ok()) {
      result = outcome.status();
    } else if (!outcome->report) {
      return kExitOk;
    } else {
      result = std::move(outcome->result);
      device_check = outcome->device_check;
      costs = std::move(outcome->costs);
      graph = outcome->graph;
    }
  }
  f.run.on_step = nullptr;
  if (!result.ok()) return Fail(command, in_file(result.status()));
  const TransformerReplay* host_transformer =
      transformer && transformer->check && f.reference_check ? &*transformer : nullptr;
  absl::StatusOr<std::optional<MlpComparison>> check =
      device_check.has_value() || device_transformer
          ? std::optional<MlpComparison>(device_check)
          : CheckMlp(*result, mlp, host_transformer, plan->model);
  if (!check.ok()) return Fail(command, in_file(check.status()));
  if (const std::string trace = absl::GetFlag(FLAGS_trace); !trace.empty()) {
    if (absl::Status s = WriteTrace(trace, path, f, *plan, *result); !s.ok()) return Fail(command, s);
  }
  std::optional<StageTimesReport> stage_times;
  if (f.run.record_timeline && !f.traits.device) {
    StageTimesReport report;
    report.skipped_steps = f.steps > 1 ? 1 : 0;
    absl::StatusOr<std::vector<StageCallTimes>> times =
        MeasureStageCallTimes(plan->schedule, result->timeline, f.steps, report.skipped_steps);
    if (!times.ok()) return Fail(command, in_file(times.status()));
    report.times = *std::move(times);
    report.partition = partition_used;
    report.shape = transformer_shape;
    stage_times = std::move(report);
  }
  if (absl::GetFlag(FLAGS_json)) {
    PrintJson(f, *plan, *result, *check, costs, graph, stage_times);
  } else {
    PrintText(path, f, *plan, *result, *check, costs, graph, stage_times);
  }
  if (check->has_value() && !Passes(**check, f)) {
    return Fail(command, in_file(absl::DataLossError(absl::StrCat(
                             "the replay differs from the reference trainer beyond ",
                             Tolerances(f), ": ", (*check)->ToString()))));
  }
  if (graph.has_value() && graph->check.has_value() && !Passes(*graph->check, f)) {
    return Fail(command, in_file(absl::DataLossError(absl::StrCat(
                             "the step replayed as a CUDA graph differs from the reference "
                             "trainer beyond ", Tolerances(f), ": ",
                             graph->check->ToString()))));
  }
  return kExitOk;
}

}  // namespace

Command ReplayCommand() {
  return Command{
      .name = "replay",
      .synopsis = "replay FILE --backend inproc|mpi|cuda|nccl|nccl-lazy --stage mlp|cost|transformer [--model MODEL] [--steps N] "
                  "[--dp N] [--policy jit|eager] [--reference-check=false] [--trace OUT] "
                  "[--timeout SECONDS] "
                  "[--flight-dir DIR] [--json]",
      .summary =
          "Run a schedule for real: every rank a thread (pp x dp), real copies between their "
          "buffers, gradient reductions on a thread per rank overlapping the compute. A "
          "compute-only FILE is lowered first (receives just in time, REDUCE_GRAD). Prints the "
          "loss, the step time, each rank's peak memory measured vs planned, the transport's "
          "staged bytes and the measured exposed reduction. --stage mlp runs an exact MLP "
          "(blocks of 2 Linear(32x32)+tanh layers, 8 samples per microbatch, seed 1; --model "
          "optional, its dp settings apply) and checks the loss and every gradient against an "
          "unpipelined reference trainer (exit 1 beyond 1e-5 relative); --stage cost spends "
          "the model's times and moves its byte sizes; --stage transformer (inproc or cuda; "
          "when built with OpenBLAS) runs an exact fp32 decoder-only transformer (RMSNorm, "
          "rotary GQA attention kept as output + log-sum-exp, SwiGLU, embedding on the first stage, cross "
          "entropy on the last) cut as --model's partition cuts it, and checks it against an "
          "unpipelined reference trainer (exit 1 beyond 1e-5 relative): MODEL is what `jitpipe "
          "model` wrote, and since a model file holds sizes, not the shape, replay takes the "
          "same shape flags `jitpipe model` was given (--layers, --hidden, --heads, --kv-heads, "
          "--ffn, --vocab, --seq, --microbatch-size, --dtype fp32, --swiglu, --rmsnorm; --tflops "
          "is not needed) and refuses a MODEL whose layers' bytes differ from theirs; with --backend "
          "cuda it runs the block in bf16 with fp32 accumulation on the GPU (cuBLAS; MODEL and "
          "flags at --dtype bf16), checked against the same fp32 reference within 1e-2 (loss) "
          "and 5e-2 (gradients) relative; --reference-check=false skips the reference (at a "
          "real size it is hundreds of TFLOPs on the CPU). On a timeout every rank dumps its "
          "flight record (--flight-dir) and the error names the operation that never matched. "
          "--backend mpi (when built with MPI): run as `mpirun -np <pp x dp> jitpipe replay "
          "FILE --backend mpi ...`, one process per rank; every process reads FILE and MODEL, "
          "world rank 0 prints the report and writes --trace (every rank's timeline), and on a "
          "failure every process writes its flight record and rank 0 collects them all. "
          "--backend cuda (when built with CUDA): every rank a set of streams on GPU 0, "
          "transfers device-to-device copies; --stage mlp is the cuBLAS mlp (fp32), checked "
          "against the reference trainer; the table adds each rank's memory-pool peak. "
          "--backend nccl|nccl-lazy: as mpi, one GPU per process, NCCL with one communicator "
          "over the job (nccl) or one per directed pair (nccl-lazy); the stages are the cpu "
          "ones staged through host memory. Without a CUDA device these exit 1 with \"no "
          "CUDA device\".",
      .flags = {"backend", "stage", "model", "layout", "partition", "time_budget", "steps", "dp", "policy",
                "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "microbatch_size",
                "tp", "dtype", "sequence_parallel", "swiglu", "rmsnorm", "recompute", "attention",
                "dropout", "loss_dtype", "tied_embeddings",
                "buffers", "measure_costs", "reference_check", "graph", "trace",
                "timeout", "flight_dir", "json", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunReplay,
  };
}

}  // namespace jitpipe::cli
