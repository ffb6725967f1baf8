// The cost model file (format "jitpipe.model", version 1): per-stage times and
// byte sizes, point-to-point links and data-parallel gradient reduction. The
// memory planner reads the byte sizes, the simulator the times.
//
//   {"format": "jitpipe.model", "version": 1,
//    "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
//                 "input_bytes": 1048576, "output_bytes": 1048576,
//                 "stash_bytes": 4194304, "param_bytes": 16777216},
//    "stages": [{"index": 7, "forward_us": 2}],
//    "p2p": {"latency_us": 0, "gb_per_s": 0},
//    "dp": {"size": 1, "reduce": "all_reduce", "param_dtype": "fp32", "grad_dtype": "fp32",
//           "reduce_dtype": null, "latency_us": 10, "gb_per_s": 100, "buckets": 1}}
//
// Per-stage keys (in "defaults" and in each "stages" entry):
//   forward_us, backward_input_us, backward_weight_us   times of F, I and W
//   backward_us       time of a full B; default backward_input_us + backward_weight_us
//   overlap_f_b_us    time of an OVERLAP_F_B whose forward is on this stage;
//                     default: the sum of its parts
//   input_bytes       a stage input activation (and its gradient)
//   output_bytes      a stage output (and the gradient received for it)
//   stash_bytes       what F saves for the backward
//   stash_segments    optional: the stash as the tensors it is made of, each
//                     allocated on its own (one per layer in a model partitioned
//                     from layers), e.g. [134217728, 134217728, 428498944]; they
//                     sum to stash_bytes (which may then be left out). Absent
//                     or []: one allocation of stash_bytes. A segment is planned as its
//                     own buffer, so the arena may place the segments apart.
//   param_bytes       the stage's parameters, in dp.param_dtype
// A "stages" entry overrides the keys it gives for the stage "index"; every
// other key comes from "defaults".
//
// Defaults for absent keys: every time and byte size 0 (a model that gives
// only byte sizes is a memory model, one that gives only times a time model);
// "p2p" latency 0 and gb_per_s 0 (free, infinitely fast transfers); "dp" size 1,
// reduce "all_reduce", param and grad dtype "fp32", reduce_dtype null (= the
// grad dtype), latency 0, gb_per_s 0. Bandwidths are in 10^9 bytes per second;
// 0 means infinite. Unknown keys are ignored: keys may be added within a
// version, none is renamed.
//
// Reduction buckets: "dp.buckets" = k (default 1) splits each stage's
// reduction into k equal buckets, each one collective of ReduceTrafficBytes / k
// costing dp.latency_us + its bytes / bandwidth. A stage's gradients are
// complete after its last W (or B), but become ready layer by layer during
// that action, as DDP's bucket hooks exploit: bucket i (0 <= i < k - 1) is
// ready at fraction (i + 1) / k of that action's duration, and the last
// bucket when the program issues the stage's REDUCE_GRAD (after the action).
// Each bucket is reduced on the rank's reduction stream from then on, so
// only the last bucket has to follow the compute. k = 1 is one reduction
// issued by REDUCE_GRAD.
//
// Dtypes: fp32 (4 bytes), bf16 and fp16 (2), fp8_e4m3 and fp8_e5m2 (1).
// Gradients have as many elements as the parameters (param_bytes / size of
// param_dtype), in grad_dtype; a reduction moves them in reduce_dtype.
//
// Model is a copyable value type; every function here is thread-compatible.
#ifndef JITPIPE_SCHEDULER_IR_MODEL_H_
#define JITPIPE_SCHEDULER_IR_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/atomic_file.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/action.h"

namespace jitpipe {

inline constexpr absl::string_view kModelFormat = "jitpipe.model";
inline constexpr int kModelVersion = 1;         // per-stage costs (this file)
inline constexpr int kLayeredModelVersion = 2;  // layers and heads (layered_model.h)

enum class Dtype : uint8_t { kFp32, kBf16, kFp16, kFp8E4m3, kFp8E5m2 };

// "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2".
absl::string_view DtypeName(Dtype dtype);
int DtypeBytes(Dtype dtype);
// Errors: InvalidArgument `unknown dtype "x"; expected fp32, bf16, fp16,
// fp8_e4m3 or fp8_e5m2`.
absl::StatusOr<Dtype> ParseDtype(absl::string_view name);

enum class ReduceKind : uint8_t { kAllReduce, kReduceScatter };

// "all_reduce", "reduce_scatter".
absl::string_view ReduceKindName(ReduceKind kind);

// The per-stage keys as written in "defaults" or one "stages" entry; an
// unset field was absent from the file.
struct StageSpec {
  std::optional<double> forward_us;
  std::optional<double> backward_input_us;
  std::optional<double> backward_weight_us;
  std::optional<double> backward_us;
  std::optional<double> overlap_f_b_us;
  std::optional<int64_t> input_bytes;
  std::optional<int64_t> output_bytes;
  std::optional<int64_t> stash_bytes;
  std::optional<std::vector<int64_t>> stash_segments;
  std::optional<int64_t> param_bytes;
};

// At most this many stash segments per stage.
inline constexpr int kMaxStashSegments = 1 << 16;

struct StageOverride {
  int index = 0;  // the stage it applies to
  StageSpec spec;
};

// One stage's resolved costs (overrides over defaults over zeros).
struct StageCost {
  double forward_us = 0;
  double backward_input_us = 0;
  double backward_weight_us = 0;
  double backward_us = 0;     // as given, else backward_input_us + backward_weight_us
  double overlap_f_b_us = 0;  // as given, else forward_us + backward_us
  bool overlap_f_b_given = false;
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;
  int64_t stash_bytes = 0;
  // Empty: one allocation of stash_bytes; else the segments, summing to it.
  // From the same entry as stash_bytes (an override giving either key
  // replaces both of the defaults').
  std::vector<int64_t> stash_segments = {};
  int64_t param_bytes = 0;

  // The stash's allocations: stash_segments, or {stash_bytes} without them.
  std::vector<int64_t> StashAllocations() const;
};

// A link: a transfer of b bytes takes latency_us + b / (gb_per_s * 1e3) us.
struct Link {
  double latency_us = 0;
  double gb_per_s = 0;  // 0: infinite bandwidth
  double TransferUs(double bytes) const;
};

struct DataParallelSpec {
  int size = 1;
  ReduceKind reduce = ReduceKind::kAllReduce;
  Dtype param_dtype = Dtype::kFp32;
  Dtype grad_dtype = Dtype::kFp32;
  std::optional<Dtype> reduce_dtype;  // unset: reduce in grad_dtype
  Link link;
  int buckets = 1;  // a stage's reduction in this many buckets (see above)

  Dtype EffectiveReduceDtype() const { return reduce_dtype.value_or(grad_dtype); }
  // True when the reduction needs its own buffer: reduce_dtype set and
  // different from grad_dtype.
  bool ReducesInOtherDtype() const {
    return reduce_dtype.has_value() && *reduce_dtype != grad_dtype;
  }
  // The fraction of the reduced bytes each rank moves: 2(size-1)/size for a
  // ring all-reduce, (size-1)/size for a reduce-scatter; 0 when size is 1.
  double TrafficFraction() const;
};

struct Model {
  StageSpec defaults;
  std::vector<StageOverride> stages;  // in file order
  Link p2p;
  DataParallelSpec dp;

  // The stage's costs. Cost O(number of overrides): callers in hot loops
  // resolve each stage once.
  StageCost ForStage(int stage) const;

  // Parameter elements of a stage: param_bytes / size of param_dtype.
  int64_t ParamElements(int stage) const;
  // Its gradients: ParamElements x size of grad_dtype.
  int64_t GradBytes(int stage) const;
  // Its gradients in the reduce dtype (the reduction's operand).
  int64_t ReduceBytes(int stage) const;
  // Bytes each rank sends to reduce the stage's gradients:
  // ReduceBytes x dp.TrafficFraction().
  double ReduceTrafficBytes(int stage) const;

  // Time of a compute action: F, I, W and B from their stage; an OVERLAP_F_B
  // takes its forward part's overlap_f_b_us when given, else the sum of its
  // parts. 0 for every other kind. REQUIRES: the action's stages are >= 0.
  double ComputeUs(const Action& action) const;
};

// At most this many bytes in one buffer (1 TiB): gradients in a wider dtype
// than the parameters (x4) and sums over millions of live buffers then stay
// within int64.
inline constexpr int64_t kMaxModelBytes = int64_t{1} << 40;

// The ranges of a model's quantities. A time is at most 10^12 us (11.6
// days); a bandwidth is 0 (unlimited) or from 10^-6 to 10^9 GB/s. Sums of
// such times over the largest program the engine takes (kMaxGeneratedWork
// pairs, a few actions each) and a transfer of kMaxModelBytes at the lowest
// bandwidth stay finite doubles and fit in int64 nanoseconds (a cost stage
// sleeps for them).
inline constexpr double kMaxModelUs = 1e12;
inline constexpr double kMinModelGbPerS = 1e-6;
inline constexpr double kMaxModelGbPerS = 1e9;
// Data-parallel replicas a model may describe, and reduction buckets.
inline constexpr int kMaxDataParallel = 1 << 20;
inline constexpr int kMaxReduceBuckets = 4096;

// Unit costs: F = I = W = 1 us on every stage (B = 2), free communication,
// no sizes. The model of a schedule's shape alone: what `render` draws and
// the tests' anchors use.
Model UnitCostModel();

// Checks the ranges of every field, naming it: times in [0, kMaxModelUs],
// bandwidths 0 or in [kMinModelGbPerS, kMaxModelGbPerS], byte sizes in
// [0, kMaxModelBytes], param_bytes a whole number of param_dtype elements,
// override indices >= 0 and distinct, dp.size in [1, kMaxDataParallel],
// dp.buckets in [1, kMaxReduceBuckets]. Errors: InvalidArgument, e.g.
//   "stages[1].forward_us" must be a number from 0 to 1e+12, found -1
absl::Status ValidateModel(const Model& model);

// Refuses an override for a stage the schedule does not have. Errors:
// InvalidArgument, e.g.
//   "stages[0].index" is 9 but the schedule has 8 stages (0 to 7)
absl::Status CheckModelFits(const Model& model, int num_stages);

// Parses a model document and validates it (ValidateModel). A version newer
// than kLayeredModelVersion is refused as written by a newer jitpipe, a
// version 2 (layered) one as needing a partition (model_file.h reads both).
// Errors: InvalidArgument naming the field.
absl::StatusOr<Model> ParseModelJson(absl::string_view text);

// Reads and parses a model file; every error message starts with the path.
// Errors: NotFound / Unavailable for I/O, InvalidArgument for content,
// ResourceExhausted for a file longer than `max_bytes`.
absl::StatusOr<Model> LoadModel(const std::string& path,
                                std::uint64_t max_bytes = kDefaultMaxInputBytes);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_MODEL_H_
