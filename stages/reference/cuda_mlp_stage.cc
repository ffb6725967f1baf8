#include "stages/reference/cuda_mlp_stage.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"
#include "stages/reference/cublas_error.h"
#include "stages/reference/cuda_mlp_gemm.h"
#include "stages/reference/cuda_mlp_kernels.h"

namespace jitpipe {
namespace reference_cuda {
namespace {

// cuBLAS's workspace per stage, set explicitly (cublasSetWorkspace) so that
// cuBLAS allocates nothing while a step is captured as a graph. 4 MiB is
// NVIDIA's recommendation before Hopper; these products are small.
constexpr size_t kCublasWorkspaceBytes = size_t{4} << 20;

}  // namespace

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};

using DeviceMemory = std::unique_ptr<void, CudaFree>;
using PinnedMemory = std::unique_ptr<void, CudaFreeHost>;

// One stage's gradients as its last FinishStep copied them (pinned, so that
// the copy is asynchronous).
struct GradSlot {
  PinnedMemory grads;  // block_params floats
  int64_t floats = 0;
  bool written = false;
};

// Everything a stage holds on its device. Buffers that the stage's role does
// not need (inputs off the chain's first stage, targets and losses off its
// last) stay null.
struct DeviceState {
  int ordinal = -1;
  cublasHandle_t blas = nullptr;
  DeviceMemory params;       // block_params in dtype
  DeviceMemory work;         // rows x hidden fp32: a product before its epilogue
  DeviceMemory blas_work;    // kCublasWorkspaceBytes
  DeviceMemory inputs;       // microbatches x rows x hidden in dtype
  DeviceMemory targets;      // microbatches x rows x hidden fp32
  DeviceMemory losses;       // microbatches doubles
  PinnedMemory host_losses;  // microbatches doubles: Loss() reads these

  DeviceState() = default;
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  ~DeviceState() {
    if (blas != nullptr) cublasDestroy(blas);
  }
};

namespace {

absl::StatusOr<DeviceMemory> AllocateDevice(size_t bytes) {
  void* p = nullptr;
  CUDA_CALL(cudaMalloc(&p, bytes));
  return DeviceMemory(p);
}

absl::StatusOr<PinnedMemory> AllocatePinned(size_t bytes) {
  void* p = nullptr;
  CUDA_CALL(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
  std::memset(p, 0, bytes);
  return PinnedMemory(p);
}

// A synchronous copy: creation only, never inside a step.
absl::StatusOr<DeviceMemory> Upload(const std::vector<std::byte>& bytes) {
  ASSIGN_OR_RETURN(DeviceMemory memory, AllocateDevice(bytes.size()));
  CUDA_CALL(cudaMemcpy(memory.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return memory;
}

// The calling thread's current device, or Unavailable naming `who` when
// there is no usable device or driver (as comm/cuda/cuda_error.h says it).
absl::StatusOr<int> UsableDevice(absl::string_view who) {
  int count = 0;
  absl::Status found =
      CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount", __FILE__, __LINE__);
  if (found.ok() && count == 0) found = absl::UnavailableError("no devices");
  if (!found.ok()) {
    cudaGetLastError();  // the failure is reported here; do not leave it to a later launch
    return absl::UnavailableError(
        absl::StrCat(who, ": no usable CUDA device (", found.message(), ")"));
  }
  int device = -1;
  CUDA_CALL(cudaGetDevice(&device));
  return device;
}

template <typename T>
constexpr cudaDataType kCudaType = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;

// One product of cuda_mlp_gemm.h: inputs in T, fp32 accumulation
// (CUBLAS_COMPUTE_32F), C in `c_type`.
template <typename T>
absl::Status Gemm(cublasHandle_t blas, const GemmCall& call, const T* a, const T* b, void* c,
                  cudaDataType c_type) {
  const float alpha = 1.0f;
  CUBLAS_CALL(cublasGemmEx(blas, call.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                               call.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, call.m, call.n, call.k,
                               &alpha, a, kCudaType<T>, call.lda, b, kCudaType<T>, call.ldb,
                               &call.beta, c, c_type, call.ldc, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

// Index spaces below: layers l of the block; rows r x hidden h per tensor;
// a layer's parameters are W_l (h x h) then b_l (h) at l x layer_params.
template <typename T>
absl::Status ForwardBlock(const MlpShape& s, const DeviceState& d, const T* x, T* acts,
                          bool linear_head, cudaStream_t stream) {
  const int h = s.hidden;
  const int64_t n = s.activation_floats();
  const T* params = static_cast<const T*>(d.params.get());
  float* z = static_cast<float*>(d.work.get());
  for (int l = 0; l < s.layers; ++l) {
    const T* w = params + l * s.layer_params();
    const T* in = l == 0 ? x : acts + (l - 1) * n;
    RETURN_IF_ERROR(Gemm<T>(d.blas, ForwardGemm(s), w, in, z, CUDA_R_32F));
    const bool tanh_layer = !(linear_head && l == s.layers - 1);
    CUDA_CALL(LaunchBiasActivation<T>(z, w + static_cast<int64_t>(h) * h, acts + l * n, s.rows,
                                          h, tanh_layer, stream));
  }
  return absl::OkStatus();
}

// From the gradient of the block's output: `grad_out`, or, when null, the
// last layer's dz already in place (the chain's last stage: the loss's
// gradient, linear head). Fills every layer's dz and, when grad_in is not
// null, the block input's gradient.
template <typename T>
absl::Status BackwardInputBlock(const MlpShape& s, const DeviceState& d, const T* acts,
                                const T* grad_out, T* dz, T* grad_in, cudaStream_t stream) {
  const int64_t n = s.activation_floats();
  const T* params = static_cast<const T*>(d.params.get());
  float* g = static_cast<float*>(d.work.get());
  const int top = s.layers - 1;
  if (grad_out != nullptr) {
    CUDA_CALL((LaunchActivationGrad<T, T>(grad_out, acts + top * n, dz + top * n, n,
                                              /*use_tanh=*/true, stream)));
  }
  for (int l = top; l > 0; --l) {
    const T* w = params + l * s.layer_params();
    RETURN_IF_ERROR(Gemm<T>(d.blas, InputGradGemm(s), w, dz + l * n, g, CUDA_R_32F));
    CUDA_CALL((LaunchActivationGrad<float, T>(g, acts + (l - 1) * n, dz + (l - 1) * n, n,
                                                  /*use_tanh=*/true, stream)));
  }
  if (grad_in == nullptr) return absl::OkStatus();
  return Gemm<T>(d.blas, InputGradGemm(s), params, dz, grad_in, kCudaType<T>);
}

template <typename T>
absl::Status BackwardWeightBlock(const MlpShape& s, const DeviceState& d, const T* x,
                                 const T* acts, const T* dz, float* grads, cudaStream_t stream) {
  const int h = s.hidden;
  const int64_t n = s.activation_floats();
  for (int l = 0; l < s.layers; ++l) {
    const T* in = l == 0 ? x : acts + (l - 1) * n;
    float* gw = grads + l * s.layer_params();
    RETURN_IF_ERROR(Gemm<T>(d.blas, WeightGradGemm(s), dz + l * n, in, gw, CUDA_R_32F));
    CUDA_CALL(LaunchBiasGrad<T>(dz + l * n, gw + static_cast<int64_t>(h) * h, s.rows, h,
                                    stream));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace reference_cuda

using reference_cuda::DeviceMemory;
using reference_cuda::DeviceState;
using reference_cuda::GradSlot;

namespace {

cudaStream_t StreamOf(const ExecutionContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

template <typename T>
const T* As(ConstBytes bytes) {
  return bytes.empty() ? nullptr : reinterpret_cast<const T*>(bytes.data());
}
template <typename T>
T* As(MutableBytes bytes) {
  return bytes.empty() ? nullptr : reinterpret_cast<T*>(bytes.data());
}

std::string Who(int stage) { return absl::StrCat("cuda mlp stage ", stage); }

}  // namespace

absl::Status ValidateCudaMlpOptions(const CudaMlpOptions& options) {
  if (options.dtype != Dtype::kFp32 && options.dtype != Dtype::kBf16) {
    return absl::InvalidArgumentError(absl::StrCat("cuda mlp: dtype ", DtypeName(options.dtype),
                                                   " is not supported; expected fp32 or bf16"));
  }
  const MlpShape& s = options.mlp.shape;
  if (s.hidden < 1 || s.rows < 1 || s.layers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cuda mlp: shape hidden ", s.hidden, ", rows ",
                                                   s.rows, ", layers ", s.layers,
                                                   "; each must be at least 1"));
  }
  return absl::OkStatus();
}

StageSizes CudaMlpSizes(const CudaMlpOptions& options) {
  const MlpShape& s = options.mlp.shape;
  const int64_t activation = s.activation_floats() * DtypeBytes(options.dtype);
  return StageSizes{activation, activation, 2 * s.layers * activation,
                    s.block_params() * static_cast<int64_t>(sizeof(float))};
}

std::vector<std::byte> EncodeFloats(absl::Span<const float> values, Dtype dtype) {
  std::vector<std::byte> out(values.size() * static_cast<size_t>(DtypeBytes(dtype)));
  if (dtype == Dtype::kFp32) {
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  for (size_t k = 0; k < values.size(); ++k) {
    const __nv_bfloat16 b = __float2bfloat16_rn(values[k]);
    std::memcpy(out.data() + 2 * k, &b, 2);
  }
  return out;
}

std::vector<float> DecodeFloats(ConstBytes bytes, Dtype dtype) {
  std::vector<float> out(bytes.size() / static_cast<size_t>(DtypeBytes(dtype)));
  if (dtype == Dtype::kFp32) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }
  for (size_t k = 0; k < out.size(); ++k) {
    __nv_bfloat16 b;
    std::memcpy(&b, bytes.data() + 2 * k, 2);
    out[k] = __bfloat162float(b);
  }
  return out;
}

std::vector<std::byte> CudaMlpInitialParams(const CudaMlpOptions& options, int block) {
  return EncodeFloats(MlpInitialParams(options.mlp.shape, options.mlp.seed, block), options.dtype);
}

std::vector<std::byte> CudaMlpData(const CudaMlpOptions& options, MlpData what, int replica,
                                   int chain, int microbatches) {
  const MlpShape& s = options.mlp.shape;
  std::vector<float> values(static_cast<size_t>(microbatches * s.activation_floats()));
  for (int m = 0; m < microbatches; ++m) {
    MlpFill(s, options.mlp.seed, what, replica, chain, m, values.data() + m * s.activation_floats());
  }
  return EncodeFloats(values, what == MlpData::kTarget ? Dtype::kFp32 : options.dtype);
}

absl::Status RequireDeviceStream(const ExecutionContext& ctx, absl::string_view who, int device) {
  if (ctx.memory_space != MemorySpace::kDevice) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " computes on CUDA device ", device, "; this rank's buffers are in ",
                     MemorySpaceName(ctx.memory_space), " memory"));
  }
  if (ctx.stream == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " enqueues its work on a stream; this rank's context has none"));
  }
  if (ctx.device != device) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, " computes on CUDA device ", device, "; this rank's context is device ", ctx.device));
  }
  return absl::OkStatus();
}

CudaMlpStage::CudaMlpStage(const CudaMlpOptions& options, const MlpLayout& layout, int stage,
                           int replica, GradSlot* finished)
    : options_(options),
      layout_(layout),
      stage_(stage),
      replica_(replica),
      chain_(stage / layout.stages_per_chain),
      first_(stage % layout.stages_per_chain == 0),
      last_(stage % layout.stages_per_chain == layout.stages_per_chain - 1),
      element_bytes_(DtypeBytes(options.dtype)),
      finished_(finished) {}

CudaMlpStage::~CudaMlpStage() = default;

absl::StatusOr<std::unique_ptr<CudaMlpStage>> CudaMlpStage::Create(const CudaMlpOptions& options,
                                                                   const MlpLayout& layout,
                                                                   int stage, int replica,
                                                                   GradSlot* finished) {
  RETURN_IF_ERROR(ValidateCudaMlpOptions(options));
  if (stage < 0 || stage >= layout.num_stages() || replica < 0 || replica >= layout.dp) {
    return absl::InvalidArgumentError(absl::StrCat("cuda mlp: no stage ", stage, " of replica ",
                                                   replica, " in a pipeline of ",
                                                   layout.num_stages(), " stages x dp ",
                                                   layout.dp));
  }
  ASSIGN_OR_RETURN(const int ordinal, reference_cuda::UsableDevice(Who(stage)));
  std::unique_ptr<CudaMlpStage> out(new CudaMlpStage(options, layout, stage, replica, finished));
  auto d = std::make_unique<DeviceState>();
  d->ordinal = ordinal;
  const absl::Status made = [&]() -> absl::Status {
    using reference_cuda::AllocateDevice;
    const MlpShape& s = options.mlp.shape;
    const int mbs = layout.microbatches_per_chain();
    CUBLAS_CALL(cublasCreate(&d->blas));
    CUBLAS_CALL(cublasSetMathMode(d->blas, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    ASSIGN_OR_RETURN(d->params, reference_cuda::Upload(CudaMlpInitialParams(
                                    options, stage % layout.stages_per_chain)));
    ASSIGN_OR_RETURN(d->work, AllocateDevice(s.activation_floats() * sizeof(float)));
    ASSIGN_OR_RETURN(d->blas_work, AllocateDevice(reference_cuda::kCublasWorkspaceBytes));
    if (out->first_) {
      ASSIGN_OR_RETURN(d->inputs, reference_cuda::Upload(CudaMlpData(
                                      options, MlpData::kInput, replica, out->chain_, mbs)));
    }
    if (out->last_) {
      ASSIGN_OR_RETURN(d->targets, reference_cuda::Upload(CudaMlpData(
                                       options, MlpData::kTarget, replica, out->chain_, mbs)));
      ASSIGN_OR_RETURN(d->losses, AllocateDevice(mbs * sizeof(double)));
      CUDA_CALL(cudaMemset(d->losses.get(), 0, mbs * sizeof(double)));
      ASSIGN_OR_RETURN(d->host_losses, reference_cuda::AllocatePinned(mbs * sizeof(double)));
    }
    // The copies above may still be in flight (a pageable cudaMemcpy returns
    // once staged; cudaMemset is asynchronous) and the caller's stream may
    // not be ordered after the default stream: finish them here.
    CUDA_CALL(cudaDeviceSynchronize());
    return absl::OkStatus();
  }();
  if (!made.ok()) return absl::Status(made.code(), absl::StrCat(Who(stage), ": ", made.message()));
  out->device_ = std::move(d);
  return out;
}

int CudaMlpStage::device() const { return device_->ordinal; }

StageSizes CudaMlpStage::Sizes() const { return CudaMlpSizes(options_); }

absl::Status CudaMlpStage::Check(absl::string_view role, size_t bytes, int64_t elements,
                                 int element_bytes, bool may_be_empty) const {
  const int64_t expected = elements * element_bytes;
  if (bytes == static_cast<size_t>(expected) || (may_be_empty && bytes == 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(Who(stage_), ": the ", role, " buffer has ", bytes,
                                                 " bytes; expected ", expected));
}

absl::Status CudaMlpStage::CheckCall(const ExecutionContext& ctx, int microbatch) const {
  RETURN_IF_ERROR(RequireDeviceStream(ctx, Who(stage_), device_->ordinal));
  int current = -1;
  CUDA_CALL(cudaGetDevice(&current));
  if (current != device_->ordinal) {
    return absl::FailedPreconditionError(
        absl::StrCat(Who(stage_), " computes on CUDA device ", device_->ordinal,
                     "; the calling thread's current device is ", current));
  }
  if (microbatch >= 0 && microbatch < layout_.microbatches_per_chain()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(Who(stage_), ": microbatch ", microbatch,
                                                 " is outside 0..",
                                                 layout_.microbatches_per_chain() - 1));
}

absl::Status CudaMlpStage::BindStream(const ExecutionContext& ctx) const {
  // cublasSetStream resets the workspace to cuBLAS's own pool: set ours again.
  CUBLAS_CALL(cublasSetStream(device_->blas, StreamOf(ctx)));
  CUBLAS_CALL(cublasSetWorkspace(device_->blas, device_->blas_work.get(),
                                     reference_cuda::kCublasWorkspaceBytes));
  return absl::OkStatus();
}

absl::Status CudaMlpStage::LoadInput(const ExecutionContext& ctx, int microbatch,
                                     MutableBytes input) {
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  if (!first_) {
    return absl::FailedPreconditionError(
        absl::StrCat(Who(stage_), " is not its chain's first stage: it holds no inputs"));
  }
  const int64_t n = options_.mlp.shape.activation_floats();
  RETURN_IF_ERROR(Check("input", input.size(), n, element_bytes_, false));
  const size_t bytes = input.size();
  const std::byte* from = static_cast<const std::byte*>(device_->inputs.get()) + microbatch * bytes;
  CUDA_CALL(
      cudaMemcpyAsync(input.data(), from, bytes, cudaMemcpyDeviceToDevice, StreamOf(ctx)));
  return absl::OkStatus();
}

absl::Status CudaMlpStage::Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                                   MutableBytes output, StashView stash_view) {
  const MutableBytes stash = stash_view.Single();
  const MlpShape& s = options_.mlp.shape;
  const int64_t n = s.activation_floats();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), n, element_bytes_, false));
  RETURN_IF_ERROR(Check("output", output.size(), n, element_bytes_, last_));
  RETURN_IF_ERROR(Check("stash", stash.size(), 2 * s.layers * n, element_bytes_, false));
  RETURN_IF_ERROR(BindStream(ctx));
  cudaStream_t stream = StreamOf(ctx);
  const size_t activation_bytes = static_cast<size_t>(n) * element_bytes_;
  const std::byte* y = stash.data() + (s.layers - 1) * activation_bytes;
  if (options_.dtype == Dtype::kBf16) {
    RETURN_IF_ERROR(reference_cuda::ForwardBlock(s, *device_, As<__nv_bfloat16>(input),
                                                 As<__nv_bfloat16>(stash), last_, stream));
  } else {
    RETURN_IF_ERROR(reference_cuda::ForwardBlock(s, *device_, As<float>(input), As<float>(stash),
                                                 last_, stream));
  }
  if (!output.empty()) {
    CUDA_CALL(
        cudaMemcpyAsync(output.data(), y, activation_bytes, cudaMemcpyDeviceToDevice, stream));
  }
  if (!last_) return absl::OkStatus();
  const float* target = static_cast<const float*>(device_->targets.get()) + microbatch * n;
  double* loss = static_cast<double*>(device_->losses.get()) + microbatch;
  if (options_.dtype == Dtype::kBf16) {
    CUDA_CALL(reference_cuda::LaunchLoss(reinterpret_cast<const __nv_bfloat16*>(y), target, n,
                                             layout_.loss_scale(), loss, stream));
  } else {
    CUDA_CALL(reference_cuda::LaunchLoss(reinterpret_cast<const float*>(y), target, n,
                                             layout_.loss_scale(), loss, stream));
  }
  double* host = static_cast<double*>(device_->host_losses.get()) + microbatch;
  CUDA_CALL(cudaMemcpyAsync(host, loss, sizeof(double), cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

// The chain's last stage has no output gradient: it derives d loss / d y
// from the saved output and the target, straight into its last dz.
absl::Status CudaMlpStage::BackwardInput(const ExecutionContext& ctx, int microbatch,
                                         ConstBytes output_grad, StashView stash_view,
                                         MutableBytes input_grad) {
  const MutableBytes stash = stash_view.Single();
  const MlpShape& s = options_.mlp.shape;
  const int64_t n = s.activation_floats();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("output_grad", output_grad.size(), last_ ? 0 : n, element_bytes_, last_));
  RETURN_IF_ERROR(Check("stash", stash.size(), 2 * s.layers * n, element_bytes_, false));
  RETURN_IF_ERROR(Check("input_grad", input_grad.size(), first_ ? 0 : n, element_bytes_, first_));
  RETURN_IF_ERROR(BindStream(ctx));
  cudaStream_t stream = StreamOf(ctx);
  const size_t activation_bytes = static_cast<size_t>(n) * element_bytes_;
  std::byte* acts = stash.data();
  std::byte* dz = stash.data() + s.layers * activation_bytes;
  std::byte* y = acts + (s.layers - 1) * activation_bytes;
  std::byte* dy = dz + (s.layers - 1) * activation_bytes;
  const float* target = last_ ? static_cast<const float*>(device_->targets.get()) + microbatch * n
                              : nullptr;
  const float g = static_cast<float>(2.0 * layout_.loss_scale() / static_cast<double>(n));
  if (options_.dtype == Dtype::kBf16) {
    using T = __nv_bfloat16;
    if (last_) {
      CUDA_CALL(reference_cuda::LaunchLossGrad(reinterpret_cast<const T*>(y), target, n, g,
                                                   reinterpret_cast<T*>(dy), stream));
    }
    return reference_cuda::BackwardInputBlock(s, *device_, reinterpret_cast<const T*>(acts),
                                              As<T>(output_grad), reinterpret_cast<T*>(dz),
                                              As<T>(input_grad), stream);
  }
  if (last_) {
    CUDA_CALL(reference_cuda::LaunchLossGrad(reinterpret_cast<const float*>(y), target, n, g,
                                                 reinterpret_cast<float*>(dy), stream));
  }
  return reference_cuda::BackwardInputBlock(s, *device_, reinterpret_cast<const float*>(acts),
                                            As<float>(output_grad), reinterpret_cast<float*>(dz),
                                            As<float>(input_grad), stream);
}

absl::Status CudaMlpStage::BackwardWeight(const ExecutionContext& ctx, int microbatch,
                                          ConstBytes input, ConstBytes /*output_grad*/,
                                          StashView stash_view, MutableBytes param_grad) {
  const ConstBytes stash = stash_view.Single();
  const MlpShape& s = options_.mlp.shape;
  const int64_t n = s.activation_floats();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), n, element_bytes_, false));
  RETURN_IF_ERROR(Check("stash", stash.size(), 2 * s.layers * n, element_bytes_, false));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), s.block_params(), sizeof(float), false));
  RETURN_IF_ERROR(BindStream(ctx));
  const std::byte* acts = stash.data();
  const std::byte* dz = acts + s.layers * static_cast<size_t>(n) * element_bytes_;
  if (options_.dtype == Dtype::kBf16) {
    using T = __nv_bfloat16;
    return reference_cuda::BackwardWeightBlock(
        s, *device_, As<T>(input), reinterpret_cast<const T*>(acts),
        reinterpret_cast<const T*>(dz), As<float>(param_grad), StreamOf(ctx));
  }
  return reference_cuda::BackwardWeightBlock(
      s, *device_, As<float>(input), reinterpret_cast<const float*>(acts),
      reinterpret_cast<const float*>(dz), As<float>(param_grad), StreamOf(ctx));
}

double CudaMlpStage::Loss(int microbatch) const {
  if (!last_ || microbatch < 0 || microbatch >= layout_.microbatches_per_chain()) return 0;
  return static_cast<const double*>(device_->host_losses.get())[microbatch];
}

absl::Status CudaMlpStage::FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) {
  const MlpShape& s = options_.mlp.shape;
  RETURN_IF_ERROR(RequireDeviceStream(ctx, Who(stage_), device_->ordinal));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), s.block_params(), sizeof(float), false));
  if (finished_ == nullptr) return absl::OkStatus();
  CUDA_CALL(cudaMemcpyAsync(finished_->grads.get(), param_grad.data(), param_grad.size(),
                                cudaMemcpyDeviceToHost, StreamOf(ctx)));
  finished_->written = true;
  return absl::OkStatus();
}

CudaMlpStageFactory::CudaMlpStageFactory(const CudaMlpOptions& options, const MlpLayout& layout)
    : options_(options),
      layout_(layout),
      slots_(static_cast<size_t>(layout.num_stages()) * layout.dp) {}

CudaMlpStageFactory::~CudaMlpStageFactory() = default;

absl::StatusOr<std::unique_ptr<Stage>> CudaMlpStageFactory::Make(int stage, int replica) {
  RETURN_IF_ERROR(ValidateCudaMlpOptions(options_));
  if (stage < 0 || stage >= layout_.num_stages() || replica < 0 || replica >= layout_.dp) {
    return absl::InvalidArgumentError(absl::StrCat("cuda mlp: no stage ", stage, " of replica ",
                                                   replica, " in a pipeline of ",
                                                   layout_.num_stages(), " stages x dp ",
                                                   layout_.dp));
  }
  RETURN_IF_ERROR(reference_cuda::UsableDevice(Who(stage)).status());
  GradSlot* slot = nullptr;
  {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<GradSlot>& owned =
        slots_[static_cast<size_t>(replica) * layout_.num_stages() + stage];
    if (owned == nullptr) {
      auto fresh = std::make_unique<GradSlot>();
      fresh->floats = options_.mlp.shape.block_params();
      absl::StatusOr<reference_cuda::PinnedMemory> grads =
          reference_cuda::AllocatePinned(static_cast<size_t>(fresh->floats) * sizeof(float));
      if (!grads.ok()) {
        return absl::Status(grads.status().code(),
                            absl::StrCat(Who(stage), ": ", grads.status().message()));
      }
      fresh->grads = *std::move(grads);
      owned = std::move(fresh);
    }
    slot = owned.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CudaMlpStage> made,
                   CudaMlpStage::Create(options_, layout_, stage, replica, slot));
  return std::unique_ptr<Stage>(std::move(made));
}

std::vector<float> CudaMlpStageFactory::FinishedGrads(int stage, int replica) const {
  if (stage < 0 || stage >= layout_.num_stages() || replica < 0 || replica >= layout_.dp) return {};
  absl::MutexLock lock(&mu_);
  const GradSlot* slot = slots_[static_cast<size_t>(replica) * layout_.num_stages() + stage].get();
  if (slot == nullptr || !slot->written) return {};
  const float* g = static_cast<const float*>(slot->grads.get());
  return std::vector<float>(g, g + slot->floats);
}

}  // namespace jitpipe
