// The reference `mlp` stage on a CUDA device: the network, data and split
// backward of mlp_stage.h computed with cuBLAS, in fp32 or in bf16, on the
// stream the runtime hands each call, so that a replayed step on a GPU can be
// checked against the CPU's unpipelined reference trainer (mlp_reference.h).
//
// Same model: stage s of chain c runs block s mod stages_per_chain, its
// parameters MlpInitialParams(shape, seed, block) (made on the host by the
// CPU code's generator, stored in `dtype`, copied to the device once at
// creation); data MlpFill(seed, replica, chain, microbatch) (every
// microbatch of the chain made on the host and copied once: the chain's
// first stage keeps the inputs, its last the targets); MSE loss scaled by
// 1 / (microbatches x dp).
//
// Precision (CudaMlpOptions::dtype):
//   fp32  parameters, activations, stash and gradients fp32; every product
//         is a cublasGemmEx with CUBLAS_COMPUTE_32F in the default math mode
//         (no TF32). Only the order of the sums and tanhf's last bits
//         differ from the CPU: errors of order 1e-7 per operation.
//   bf16  parameters, activations (input, output, input_grad) and stash in
//         bf16; every product reads bf16 and accumulates in fp32
//         (cublasGemmEx, CUBLAS_COMPUTE_32F, reduced-precision reductions
//         disallowed); bias, activation and loss in fp32; each stored tensor
//         is rounded once, to nearest even. Parameter gradients stay fp32
//         and accumulate over microbatches in fp32 (Megatron's main_grad).
// Expected agreement with the fp32 CPU reference, as the errors
// MlpComparison reports (a tensor's max |x - ref| / max |ref|; the loss's
// |loss - ref| / |ref|): fp32 within kCudaMlpFp32Tolerance; bf16 within
// kCudaMlpBf16Tolerance for activations and gradients and
// kCudaMlpBf16LossTolerance for the loss. Why the bf16 bounds: bf16 keeps 8
// significant bits (unit roundoff 2^-8, about 4e-3) and a tensor is rounded
// at every layer boundary, so the errors of a chain of layers add up to a
// few units; an exact host emulation of these roundings
// (cuda_mlp_stage_test's CudaMlpToleranceTest: 10 seeds, chains of 4 to 9
// layers, hidden 16 to 64) gives at most 1.4e-2 on the gradients and 9e-4
// on the loss. A GPU adds only fp32 summation order and tanhf's last bits.
//
// Buffers per microbatch (Sizes(), CudaMlpSizes()): all device memory, in the
// layout of mlp_stage.h with elements of `dtype`: input and output rows x
// hidden; stash 2 x layers x rows x hidden (each layer's output, then each
// layer's dz: BackwardInput writes the dz that BackwardWeight reads);
// parameter gradients block_params fp32, layer by layer W [in x out]
// row-major then b.
//
// Streams: every call checks its context, then only enqueues work on
// ctx.stream (a cudaStream_t) and returns: it never synchronises the host,
// allocates nothing and copies nothing to or from pageable memory, so a
// step's calls can be captured as a CUDA graph. Errors found when enqueuing
// come back as Status (comm/cuda/cuda_error.h, cublas_error.h); an error of a kernel that has already
// been enqueued shows at the caller's next synchronisation.
//
// Losses: the chain's last stage computes each microbatch's loss on the
// device in its Forward and enqueues its copy, on ctx.stream, into pinned
// host memory that Loss() reads. Loss(m) is therefore the loss of m's latest
// Forward only once the caller has synchronised that stream (or an event
// recorded after that Forward); before, it may hold an older value (0 before
// the first Forward of m). Loss() itself never synchronises: an executor
// reads a step's losses after its end-of-step synchronisation. FinishStep
// likewise enqueues the copy of the reduced gradients into the factory's
// pinned memory, readable after the stream has been synchronised.
//
// Thread safety: a stage is used by one thread, as Stage requires, and all
// its calls enqueue on one stream or on streams the caller orders (they
// share one fp32 workspace and one cuBLAS handle).
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_MLP_STAGE_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_MLP_STAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "scheduler/ir/model.h"
#include "stages/exec/stage.h"
#include "stages/reference/mlp_stage.h"

namespace jitpipe {

inline constexpr double kCudaMlpFp32Tolerance = 1e-5;
inline constexpr double kCudaMlpBf16Tolerance = 3e-2;
inline constexpr double kCudaMlpBf16LossTolerance = 5e-3;

struct CudaMlpOptions {
  MlpOptions mlp;
  Dtype dtype = Dtype::kFp32;  // parameters, activations and stash: fp32 or bf16
};

// OK, or InvalidArgument naming the field: a dtype other than fp32 and bf16,
// or a shape with hidden, rows or layers below 1.
absl::Status ValidateCudaMlpOptions(const CudaMlpOptions& options);

// The sizes a stage of these options reports (see above).
StageSizes CudaMlpSizes(const CudaMlpOptions& options);

// Host-side encodings of the stored dtypes: fp32 bytes as they are; bf16
// rounded to nearest even (NaN stays NaN), two bytes each, little-endian.
// REQUIRES: dtype is fp32 or bf16.
std::vector<std::byte> EncodeFloats(absl::Span<const float> values, Dtype dtype);
std::vector<float> DecodeFloats(ConstBytes bytes, Dtype dtype);

// What a stage copies to its device at creation, made on the host with the
// CPU generator (mlp_kernels.h), in options.dtype: block `block`'s
// parameters (MlpInitialParams layout), and the inputs or targets of
// `microbatches` consecutive microbatches of (replica, chain), microbatch m
// at element m x rows x hidden (targets stay fp32: the loss reads them in
// fp32 in every precision).
std::vector<std::byte> CudaMlpInitialParams(const CudaMlpOptions& options, int block);
std::vector<std::byte> CudaMlpData(const CudaMlpOptions& options, MlpData what, int replica,
                                   int chain, int microbatches);

// For stages that compute on a CUDA device: OK for a device context with a
// stream on `device`, else FailedPrecondition
//   "<who> computes on CUDA device <device>; this rank's buffers are in host memory"
//   "<who> enqueues its work on a stream; this rank's context has none"
//   "<who> computes on CUDA device <device>; this rank's context is device <d>"
absl::Status RequireDeviceStream(const ExecutionContext& ctx, absl::string_view who, int device);

namespace reference_cuda {
struct DeviceState;  // cuda_mlp_stage.cc: the stage's device memory and cuBLAS handle
struct GradSlot;     // cuda_mlp_stage.cc: a factory's pinned copy of one stage's gradients
}  // namespace reference_cuda

class CudaMlpStage final : public Stage {
 public:
  // Makes stage `stage` of replica `replica` on the calling thread's current
  // CUDA device (cudaSetDevice): allocates its device memory, creates its
  // cuBLAS handle, and copies its parameters and data there (synchronously:
  // creation is not part of a step). `finished` (borrowed, may be null)
  // receives FinishStep's gradients; it must outlive the stage.
  // Errors: InvalidArgument for bad options or a stage or replica outside
  // the layout; Unavailable "cuda mlp stage <s>: no usable CUDA
  // device (...)" without a device or driver; ResourceExhausted when device
  // memory runs out; Internal for other CUDA or cuBLAS errors.
  static absl::StatusOr<std::unique_ptr<CudaMlpStage>> Create(const CudaMlpOptions& options,
                                                              const MlpLayout& layout, int stage,
                                                              int replica,
                                                              reference_cuda::GradSlot* finished);
  ~CudaMlpStage() override;
  CudaMlpStage(const CudaMlpStage&) = delete;
  CudaMlpStage& operator=(const CudaMlpStage&) = delete;

  // Every call first requires RequireDeviceStream(ctx, "cuda mlp stage <s>",
  // the stage's device) and the calling thread's current device to be that
  // device (FailedPrecondition otherwise), a microbatch of the chain and
  // buffers of the sizes above (InvalidArgument otherwise, as mlp_stage.h).
  StageSizes Sizes() const override;
  // The chain's first stage only (FailedPrecondition elsewhere): copies the
  // microbatch's input from the stage's device copy.
  absl::Status LoadInput(const ExecutionContext& ctx, int microbatch, MutableBytes input) override;
  absl::Status Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                       MutableBytes output, StashView stash) override;
  absl::Status BackwardInput(const ExecutionContext& ctx, int microbatch, ConstBytes output_grad,
                             StashView stash, MutableBytes input_grad) override;
  absl::Status BackwardWeight(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                              ConstBytes output_grad, StashView stash,
                              MutableBytes param_grad) override;
  // See "Losses" above: valid after the caller's synchronisation.
  double Loss(int microbatch) const override;
  absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override;

  int device() const;

 private:
  CudaMlpStage(const CudaMlpOptions& options, const MlpLayout& layout, int stage, int replica,
               reference_cuda::GradSlot* finished);
  absl::Status Check(absl::string_view role, size_t bytes, int64_t elements, int element_bytes,
                     bool may_be_empty) const;
  absl::Status CheckCall(const ExecutionContext& ctx, int microbatch) const;
  // Binds the cuBLAS handle to ctx.stream and the stage's workspace.
  absl::Status BindStream(const ExecutionContext& ctx) const;

  const CudaMlpOptions options_;
  const MlpLayout layout_;
  const int stage_;
  const int replica_;
  const int chain_;
  const bool first_;  // the chain's first block: loads inputs, no input gradient
  const bool last_;   // the chain's last block: loss, linear head
  const int element_bytes_;
  reference_cuda::GradSlot* const finished_;
  std::unique_ptr<reference_cuda::DeviceState> device_;
};

// Mirrors MlpStageFactory for CudaMlpStage.
//
// Thread safety: Make may be called from several threads (serialised
// inside); FinishedGrads once the run has ended.
class CudaMlpStageFactory final : public StageFactory {
 public:
  CudaMlpStageFactory(const CudaMlpOptions& options, const MlpLayout& layout);
  ~CudaMlpStageFactory() override;
  CudaMlpStageFactory(const CudaMlpStageFactory&) = delete;
  CudaMlpStageFactory& operator=(const CudaMlpStageFactory&) = delete;

  // CudaMlpStage::Create on the calling thread's current device, with this
  // factory's pinned slot for the stage's gradients. Errors: those of
  // Create. REQUIRES: the factory outlives the stages it makes.
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

  // The gradients stage `stage` of `replica` saw at its last FinishStep;
  // empty before, or for a stage or replica outside the layout.
  // REQUIRES: the run has ended and the streams of those FinishStep calls
  // have been synchronised.
  std::vector<float> FinishedGrads(int stage, int replica) const;

  const CudaMlpOptions& options() const { return options_; }
  const MlpLayout& layout() const { return layout_; }

 private:
  const CudaMlpOptions options_;
  const MlpLayout layout_;
  mutable absl::Mutex mu_;
  // By replica * stages + stage; made by the first Make of each.
  std::vector<std::unique_ptr<reference_cuda::GradSlot>> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_MLP_STAGE_H_
