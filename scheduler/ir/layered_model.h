// The model file, version 2 ("jitpipe.model", version 2): the model described
// once, as an ordered list of layers with embedding and loss heads, instead
// of per-stage costs. A partition (planning/partition.h) cuts it into any
// schedule's stages, so every schedule runs the same layers.
//
//   {"format": "jitpipe.model", "version": 2,
//    "input_bytes": 65536,
//    "embedding": {"forward_us": 0, "output_bytes": 33554432, "stash_bytes": 16777216,
//                  "param_bytes": 262668288},
//    "layers": [{"name": "decoder", "repeat": 80, "forward_us": 2300,
//                "backward_input_us": 2400, "backward_weight_us": 2200,
//                "output_bytes": 33554432, "stash_bytes": 536870912,
//                "param_bytes": 213909504},
//               {"repeat": 2, "block": [{"name": "attention", ...}, {"name": "moe", ...}]}],
//    "loss": {"forward_us": 900, "backward_input_us": 900, "backward_weight_us": 900,
//             "output_bytes": 4, "stash_bytes": 4236247040, "param_bytes": 262684672},
//    "device": {"memory_bytes": 85899345920, "rank_memory_bytes": [...], "peak_tflops": 989},
//    "workload": {"microbatch_size": 1, "seq_len": 8192, "tp": 1,
//                 "model_flops_per_microbatch": 4.2e14},
//    "optimizer": {"kind": "adam", "state_dtype": "fp32", "master_weights": true,
//                  "shard_over_dp": false, "zero": 0},
//    "p2p": {"latency_us": 10, "gb_per_s": 50},
//    "dp": {... as in version 1 (model.h) ...}}
//
// Per-layer keys (in "embedding", "loss" and each "layers" entry or "block"
// member): forward_us, backward_input_us (I), backward_weight_us (W);
// output_bytes, the activation the layer hands to the next one (its gradient
// comes back the same size); stash_bytes, what its forward keeps for its
// backward, per microbatch; param_bytes, its parameters in dp.param_dtype.
// Absent keys are 0. "name" labels a layer (default "layer"; "embedding",
// "loss" for the heads). A "layers" entry is one layer, or a "block" (an
// array of layers); "repeat" (default 1) repeats it in place.
//
// "input_bytes": a microbatch's data, read by the first stage (default 0).
// "embedding" and "loss" are optional; "layers" must hold at least one layer.
// "device.memory_bytes": each pipeline rank's device memory (0 or absent: no
// limit); "device.rank_memory_bytes": one limit per pipeline rank, which
// replaces memory_bytes; "device.peak_tflops": one GPU's peak dense
// throughput in 10^12 FLOP/s (H100 SXM bf16: 989), the denominator of MFU
// (absent or 0: unknown). "workload" (optional; `jitpipe model` writes it,
// every key absent or 0 meaning unknown): microbatch_size, sequences per
// microbatch (b); seq_len, tokens per sequence (s); tp, the GPUs of one
// pipeline rank (tensor parallel, default 1); model_flops_per_microbatch,
// what one microbatch costs through the whole model, forward and backward,
// all tp GPUs together, without recomputation (the FLOPs MFU counts). The
// layer times already hold these FLOPs at some achieved throughput; the
// workload keeps the FLOPs themselves so that throughput and MFU can be
// derived from a simulated step. "optimizer": kind adam (two states per parameter),
// sgd (one, momentum) or none; state_dtype (default fp32); master_weights, an
// fp32 copy of the parameters (default: when dp.param_dtype is not fp32);
// shard_over_dp, states and master weights split over the dp replicas
// (ZeRO-1, Megatron's distributed optimizer; default false); "zero", the
// ZeRO stage 0 to 3: 1 as shard_over_dp, 2 also the gradients, 3 also the
// parameters (FSDP). planning/rank_memory.h says what each keeps per rank.
//
// LayeredModel is a copyable value type; every function here is
// thread-compatible.
#ifndef JITPIPE_SCHEDULER_IR_LAYERED_MODEL_H_
#define JITPIPE_SCHEDULER_IR_LAYERED_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/model.h"

namespace jitpipe {

enum class LayerKind : uint8_t { kEmbedding, kLayer, kLoss };

// "embedding", "layer", "loss".
absl::string_view LayerKindName(LayerKind kind);

struct LayerCost {
  LayerKind kind = LayerKind::kLayer;
  std::string name = {};  // "" prints as the kind's name
  double forward_us = 0;
  double backward_input_us = 0;
  double backward_weight_us = 0;
  int64_t output_bytes = 0;
  int64_t stash_bytes = 0;
  int64_t param_bytes = 0;

  friend bool operator==(const LayerCost&, const LayerCost&) = default;
};

enum class OptimizerKind : uint8_t { kAdam, kSgd, kNone };

// "adam", "sgd", "none".
absl::string_view OptimizerKindName(OptimizerKind kind);

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdam;
  Dtype state_dtype = Dtype::kFp32;
  std::optional<bool> master_weights = {};  // unset: when the parameters are not fp32
  bool shard_over_dp = false;
  int zero = 0;  // ZeRO stage, 0 to 3; shard_over_dp is stage 1

  // The ZeRO stage in effect: at least 1 with shard_over_dp.
  int ZeroStage() const { return shard_over_dp && zero < 1 ? 1 : zero; }
  // 2 for Adam (first and second moment), 1 for SGD (momentum), 0 for none.
  int StatesPerParameter() const;
  bool HasMasterWeights(Dtype param_dtype) const {
    return kind != OptimizerKind::kNone && master_weights.value_or(param_dtype != Dtype::kFp32);
  }
  // Bytes of optimizer state for `elements` parameters on one rank: states
  // in state_dtype plus fp32 master weights, divided over `dp_size` replicas
  // (rounded up) from ZeRO stage 1 on.
  int64_t StateBytes(int64_t elements, Dtype param_dtype, int dp_size) const;
};

// What a device's memory loses before the training step's own buffers: the
// CUDA context, NCCL's buffers, the caching allocator's fragmentation. A
// model, not a measurement. `bytes` plus `fraction` of the limit; the
// standard reserve (what the CLI assumes unless told: StandardReserve()) is
// 5% of the limit for fragmentation plus min(1 GiB, 5%) for the context and
// NCCL: 5 GiB of 80 GiB, 3 GiB of 40, 8.05 GiB of 141, 10% of a small
// device. The library's default reserves nothing.
struct MemoryReserve {
  int64_t bytes = 0;
  double fraction = 0;    // of the limit
  bool standard = false;  // the standard reserve instead of bytes + fraction
};
inline constexpr int64_t kStandardReserveContextBytes = int64_t{1} << 30;
inline constexpr double kStandardReserveFraction = 0.05;
inline MemoryReserve StandardReserve() { return MemoryReserve{.standard = true}; }

struct DeviceSpec {
  int64_t memory_bytes = 0;                // 0: no limit
  std::vector<int64_t> rank_memory_bytes = {};  // per pipeline rank; replaces memory_bytes
  MemoryReserve reserve = {};
  double peak_tflops = 0;  // one GPU's peak, 10^12 FLOP/s; 0: unknown

  // The limit of pipeline rank `rank` (0: none). REQUIRES: rank >= 0.
  int64_t LimitFor(int rank) const;
  // What the reserve takes of that limit (0 without a limit).
  int64_t ReserveFor(int rank) const;
};

// What one microbatch is, for figures per token and MFU ("workload" above).
// 0 means unknown for every field but tp.
struct WorkloadSpec {
  int64_t microbatch_size = 0;            // sequences (b)
  int64_t seq_len = 0;                    // tokens per sequence (s)
  int tp = 1;                             // GPUs per pipeline rank
  double model_flops_per_microbatch = 0;  // forward + backward, all tp GPUs, no recomputation

  // b x s, or 0 when either is unknown.
  int64_t TokensPerMicrobatch() const { return microbatch_size * seq_len; }
  friend bool operator==(const WorkloadSpec&, const WorkloadSpec&) = default;
};

// Ranges of the workload and the peak: b up to 2^20, s up to 2^30, tp 1 to
// 2^16, FLOPs finite in [0, 10^30], a peak finite in [0, 10^9] TFLOP/s.
inline constexpr int64_t kMaxMicrobatchSize = int64_t{1} << 20;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 30;
inline constexpr int kMaxTp = 1 << 16;
inline constexpr double kMaxModelFlops = 1e30;
inline constexpr double kMaxPeakTflops = 1e9;

// At most this many layers after repeats are expanded.
inline constexpr int kMaxLayers = 1 << 16;
// A device limit is at most this (1 PiB).
inline constexpr int64_t kMaxDeviceBytes = int64_t{1} << 50;

struct LayeredModel {
  int64_t input_bytes = 0;
  // The embedding (if any), the layers, the loss (if any), in model order,
  // repeats expanded.
  std::vector<LayerCost> layers = {};
  Link p2p = {};
  DataParallelSpec dp = {};
  OptimizerSpec optimizer = {};
  DeviceSpec device = {};
  WorkloadSpec workload = {};

  bool HasEmbedding() const;
  bool HasLoss() const;
  // Layers of kind kLayer (the "t" of a layout string).
  int NumBodyLayers() const;
  // Parameters of the whole model, in elements of dp.param_dtype.
  int64_t ParamElements() const;
};

// Checks every field's range, naming it: times finite and >= 0, byte sizes
// in [0, kMaxModelBytes], param_bytes whole param_dtype elements, at least
// one body layer and at most kMaxLayers in all, the embedding first and the
// loss last (at most one each), device limits in [0, kMaxDeviceBytes], dp and
// p2p as in version 1, the workload and device.peak_tflops in the ranges
// above. Errors: InvalidArgument, e.g.
//   "layers[0].stash_bytes" must be a whole number >= 0, found -1
absl::Status ValidateLayeredModel(const LayeredModel& model);

// Parses a version 2 document and validates it. Errors: InvalidArgument
// naming the field ("layers[1].block[0].forward_us", "device.memory_bytes").
absl::StatusOr<LayeredModel> ParseLayeredModelJson(absl::string_view text);

// The model as a version 2 document; runs of equal consecutive body layers
// are written as one entry with "repeat". ParseLayeredModelJson inverts it.
std::string LayeredModelToJson(const LayeredModel& model);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_LAYERED_MODEL_H_
