#include "stages/reference/cuda_transformer_stage.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"
#include "stages/reference/cublas_error.h"
#include "stages/reference/cuda_mlp_stage.h"  // RequireDeviceStream, EncodeFloats
#include "stages/reference/cuda_transformer_kernels.h"
#include "stages/reference/cuda_transformer_layer.h"
#include "stages/reference/transformer_data.h"

namespace jitpipe {
namespace reference_cuda {

// As cuda_mlp_stage.cc's: set explicitly so that a captured step allocates
// nothing; Hopper's recommendation for large products.
constexpr size_t kTransformerCublasWorkspaceBytes = size_t{32} << 20;

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using Device = std::unique_ptr<void, DeviceFree>;
using Pinned = std::unique_ptr<void, PinnedFree>;

struct TransformerGradSlot {
  Pinned grads;
  int64_t floats = 0;
  bool written = false;
};

struct TransformerDevice {
  int ordinal = -1;
  cublasHandle_t blas = nullptr;
  Device params;        // the part's parameters, bf16
  Device pending;       // the norm weights' gradients I holds for W, fp32
  Device tokens;        // microbatches x rows int64: the embedding's part
  Device targets;       // microbatches x rows int64: the loss's part
  Device losses;        // microbatches doubles
  Pinned host_losses;   // microbatches doubles
  Device blas_work;
  std::vector<Device> work;  // CudaLayerWorkspaceElements' buffers
  CudaLayerWorkspace ws;
  int64_t pending_floats = 0;

  TransformerDevice() = default;
  TransformerDevice(const TransformerDevice&) = delete;
  TransformerDevice& operator=(const TransformerDevice&) = delete;
  ~TransformerDevice() {
    if (blas != nullptr) cublasDestroy(blas);
  }
};

namespace {

absl::StatusOr<Device> Allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return Device(nullptr);
  CUDA_CALL(cudaMalloc(&p, bytes));
  return Device(p);
}

absl::StatusOr<Pinned> AllocatePinned(size_t bytes) {
  void* p = nullptr;
  CUDA_CALL(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
  std::memset(p, 0, bytes);
  return Pinned(p);
}

absl::StatusOr<Device> Upload(const void* data, size_t bytes) {
  ASSIGN_OR_RETURN(Device memory, Allocate(bytes));
  CUDA_CALL(cudaMemcpy(memory.get(), data, bytes, cudaMemcpyHostToDevice));
  return memory;
}

absl::StatusOr<int> UsableDevice(absl::string_view who) {
  int count = 0;
  absl::Status found = CUDA_STATUS(cudaGetDeviceCount(&count));
  if (found.ok() && count == 0) found = absl::UnavailableError("no devices");
  if (!found.ok()) {
    cudaGetLastError();
    return absl::UnavailableError(
        absl::StrCat(who, ": no usable CUDA device (", found.message(), ")"));
  }
  int device = -1;
  CUDA_CALL(cudaGetDevice(&device));
  return device;
}

}  // namespace
}  // namespace reference_cuda

using reference_cuda::Bf16;
using reference_cuda::TransformerDevice;
using reference_cuda::TransformerGradSlot;

namespace {

constexpr int64_t kBf16 = 2;

std::string Who(int stage) { return absl::StrCat("cuda transformer stage ", stage); }

int64_t PendingFloats(const TransformerBlockShape& s, const TransformerStageParts& p) {
  return 2 * s.hidden * p.layers + (p.loss ? s.hidden : 0);
}

template <typename T>
const T* As(ConstBytes b) { return b.empty() ? nullptr : reinterpret_cast<const T*>(b.data()); }
template <typename T>
T* As(MutableBytes b) { return b.empty() ? nullptr : reinterpret_cast<T*>(b.data()); }

}  // namespace

absl::Status ValidateCudaTransformerOptions(const TransformerOptions& o) {
  RETURN_IF_ERROR(ValidateTransformerOptions(o));
  const TransformerBlockShape& s = o.shape;
  if ((s.rows() * s.ffn) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda transformer: seq x microbatch-size x ffn (", s.rows() * s.ffn,
        ") must be even, so that every fp32 stash term after the bf16 ones is 4-byte aligned"));
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  for (int64_t dim : {s.rows(), s.ffn, s.qkv_width(), s.vocab, s.seq}) {
    if (dim > kMax) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda transformer: a product dimension of ", dim, " exceeds cuBLAS's 2^31 - 1"));
    }
  }
  return absl::OkStatus();
}

StageSizes CudaTransformerSizes(const TransformerOptions& o, int part_index) {
  const TransformerBlockShape& s = o.shape;
  const TransformerStageParts& p = o.parts[part_index];
  const int64_t hidden_states = s.rows() * s.hidden * kBf16;
  const int64_t layer = reference_cuda::CudaDecoderLayerStashBytes(s);
  const int64_t head = reference_cuda::CudaLossHeadStashBytes(s);
  return StageSizes{
      p.embedding ? s.rows() * static_cast<int64_t>(sizeof(int64_t)) : hidden_states,
      p.loss ? static_cast<int64_t>(sizeof(float)) : hidden_states,
      p.layers * layer + (p.loss ? head : 0),
      PartParamFloats(s, p) * static_cast<int64_t>(sizeof(float)),
      PartStashSegments(p, layer, head)};
}

CudaTransformerStage::CudaTransformerStage(const TransformerOptions& options,
                                           const MlpLayout& layout, int stage, int replica,
                                           TransformerGradSlot* finished)
    : options_(options),
      layout_(layout),
      part_(options.parts[stage % layout.stages_per_chain]),
      stage_(stage),
      replica_(replica),
      chain_(stage / layout.stages_per_chain),
      finished_(finished) {}

CudaTransformerStage::~CudaTransformerStage() = default;

absl::StatusOr<std::unique_ptr<CudaTransformerStage>> CudaTransformerStage::Create(
    const TransformerOptions& options, const MlpLayout& layout, int stage, int replica,
    TransformerGradSlot* finished) {
  RETURN_IF_ERROR(ValidateCudaTransformerOptions(options));
  if (stage < 0 || stage >= layout.num_stages() || replica < 0 || replica >= layout.dp ||
      static_cast<int>(options.parts.size()) != layout.stages_per_chain) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda transformer: no stage ", stage, " of replica ", replica, " in a pipeline of ",
        layout.num_stages(), " stages x dp ", layout.dp, " with ", options.parts.size(),
        " parts per chain"));
  }
  ASSIGN_OR_RETURN(const int ordinal, reference_cuda::UsableDevice(Who(stage)));
  std::unique_ptr<CudaTransformerStage> out(
      new CudaTransformerStage(options, layout, stage, replica, finished));
  auto d = std::make_unique<TransformerDevice>();
  d->ordinal = ordinal;
  const absl::Status made = [&]() -> absl::Status {
    using reference_cuda::Allocate;
    using reference_cuda::Upload;
    const TransformerBlockShape& s = options.shape;
    const TransformerStageParts& p = out->part_;
    const int mbs = layout.microbatches_per_chain();
    CUBLAS_CALL(cublasCreate(&d->blas));
    CUBLAS_CALL(cublasSetMathMode(d->blas, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    const std::vector<std::byte> params = EncodeFloats(
        PartInitialParams(options, stage % layout.stages_per_chain), Dtype::kBf16);
    ASSIGN_OR_RETURN(d->params, Upload(params.data(), params.size()));
    d->pending_floats = PendingFloats(s, p);
    ASSIGN_OR_RETURN(d->pending, Allocate(d->pending_floats * sizeof(float)));
    if (d->pending_floats > 0) {
      CUDA_CALL(cudaMemset(d->pending.get(), 0, d->pending_floats * sizeof(float)));
    }
    ASSIGN_OR_RETURN(d->blas_work, Allocate(reference_cuda::kTransformerCublasWorkspaceBytes));
    const std::vector<int64_t> elements = reference_cuda::CudaLayerWorkspaceElements(s, p.loss);
    const int element_bytes[] = {4, 4, 4, 2, 4, 4, 2, 4, 2, 4};
    for (size_t i = 0; i < elements.size(); ++i) {
      ASSIGN_OR_RETURN(reference_cuda::Device buffer, Allocate(elements[i] * element_bytes[i]));
      d->work.push_back(std::move(buffer));
    }
    auto f = [&](int i) { return static_cast<float*>(d->work[i].get()); };
    auto b = [&](int i) { return static_cast<Bf16*>(d->work[i].get()); };
    d->ws = reference_cuda::CudaLayerWorkspace{f(0), f(1), f(2), b(3), f(4),
                                               f(5), b(6), f(7), b(8), f(9)};
    const size_t rows = static_cast<size_t>(s.rows());
    std::vector<int64_t> ids(rows * mbs);
    for (int m = 0; m < mbs; ++m) {
      FillTokens(s, options.seed, replica, out->chain_, m, p.embedding ? ids.data() + m * rows : nullptr,
                 p.embedding ? nullptr : ids.data() + m * rows);
    }
    if (p.embedding) {
      ASSIGN_OR_RETURN(d->tokens, Upload(ids.data(), ids.size() * 8));
    }
    if (p.loss) {
      if (p.embedding) {  // one part holds both: the targets too
        for (int m = 0; m < mbs; ++m) {
          FillTokens(s, options.seed, replica, out->chain_, m, nullptr, ids.data() + m * rows);
        }
      }
      ASSIGN_OR_RETURN(d->targets, Upload(ids.data(), ids.size() * 8));
      ASSIGN_OR_RETURN(d->losses, Allocate(mbs * sizeof(double)));
      CUDA_CALL(cudaMemset(d->losses.get(), 0, mbs * sizeof(double)));
      ASSIGN_OR_RETURN(d->host_losses, reference_cuda::AllocatePinned(mbs * sizeof(double)));
    }
    CUDA_CALL(cudaDeviceSynchronize());
    return absl::OkStatus();
  }();
  if (!made.ok()) return absl::Status(made.code(), absl::StrCat(Who(stage), ": ", made.message()));
  out->device_ = std::move(d);
  return out;
}

StageSizes CudaTransformerStage::Sizes() const {
  return CudaTransformerSizes(options_, stage_ % layout_.stages_per_chain);
}

absl::Status CudaTransformerStage::Check(absl::string_view role, size_t bytes, int64_t expected,
                                         bool may_be_empty) const {
  if (bytes == static_cast<size_t>(expected) || (may_be_empty && bytes == 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(Who(stage_), ": the ", role, " buffer has ",
                                                 bytes, " bytes; expected ", expected));
}

absl::Status CudaTransformerStage::CheckCall(const ExecutionContext& ctx, int microbatch) const {
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

absl::Status CudaTransformerStage::Bind(const ExecutionContext& ctx) const {
  CUBLAS_CALL(cublasSetStream(device_->blas, static_cast<cudaStream_t>(ctx.stream)));
  CUBLAS_CALL(cublasSetWorkspace(device_->blas, device_->blas_work.get(),
                                 reference_cuda::kTransformerCublasWorkspaceBytes));
  return absl::OkStatus();
}

absl::StatusOr<StashSegments> CudaTransformerStage::Segments(StashView stash,
                                                             const StageSizes& sizes) const {
  return SplitStash(stash, sizes.StashAllocations(), Who(stage_));
}

const std::byte* CudaTransformerStage::LayerOutputGrad(const StashSegments& stash, int i,
                                                       ConstBytes output_grad) const {
  if (i + 1 < part_.layers) return LayerStash(stash, i + 1);   // the next layer's dx
  if (part_.loss) return LayerStash(stash, part_.layers);      // the head's dx
  return output_grad.data();
}

absl::Status CudaTransformerStage::LoadInput(const ExecutionContext& ctx, int microbatch,
                                             MutableBytes input) {
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  if (!part_.embedding) {
    return absl::FailedPreconditionError(
        absl::StrCat(Who(stage_), " has no embedding: it receives its input"));
  }
  RETURN_IF_ERROR(Check("input", input.size(), Sizes().input_bytes, false));
  const std::byte* from = static_cast<const std::byte*>(device_->tokens.get()) +
                          microbatch * input.size();
  CUDA_CALL(cudaMemcpyAsync(input.data(), from, input.size(), cudaMemcpyDeviceToDevice,
                            static_cast<cudaStream_t>(ctx.stream)));
  return absl::OkStatus();
}

absl::Status CudaTransformerStage::Forward(const ExecutionContext& ctx, int microbatch,
                                           ConstBytes input, MutableBytes output,
                                           StashView stash) {
  const StageSizes sizes = Sizes();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), sizes.input_bytes, false));
  RETURN_IF_ERROR(Check("output", output.size(), sizes.output_bytes, part_.loss));
  ASSIGN_OR_RETURN(const StashSegments st, Segments(stash, sizes));
  RETURN_IF_ERROR(Bind(ctx));
  const TransformerBlockShape& s = options_.shape;
  const reference_cuda::CudaLayerContext lc{&s, device_->blas,
                                            static_cast<cudaStream_t>(ctx.stream), &device_->ws};
  auto input_of = [&](int layer) -> Bf16* {  // where layer `layer` (or the head) reads x
    if (layer < part_.layers) return reinterpret_cast<Bf16*>(LayerStash(st, layer));
    return part_.loss ? reinterpret_cast<Bf16*>(LayerStash(st, part_.layers)) : As<Bf16>(output);
  };
  const Bf16* params = static_cast<const Bf16*>(device_->params.get());
  const Bf16* x = As<Bf16>(input);
  if (part_.embedding) {
    CUDA_CALL(reference_cuda::LaunchEmbeddingForward(As<int64_t>(input), params, s.rows(),
                                                         s.hidden, input_of(0), lc.stream));
    x = input_of(0);
    params += EmbeddingParamFloats(s);
  }
  for (int i = 0; i < part_.layers; ++i) {
    RETURN_IF_ERROR(reference_cuda::CudaDecoderForward(lc, params, x, LayerStash(st, i),
                                                       input_of(i + 1)));
    x = input_of(i + 1);
    params += DecoderLayerParamFloats(s);
  }
  if (!part_.loss) return absl::OkStatus();
  double* loss = static_cast<double*>(device_->losses.get()) + microbatch;
  RETURN_IF_ERROR(reference_cuda::CudaLossHeadForward(
      lc, params, x, static_cast<const int64_t*>(device_->targets.get()) + microbatch * s.rows(),
      layout_.loss_scale(), LayerStash(st, part_.layers), loss, As<float>(output)));
  double* host = static_cast<double*>(device_->host_losses.get()) + microbatch;
  CUDA_CALL(cudaMemcpyAsync(host, loss, sizeof(double), cudaMemcpyDeviceToHost, lc.stream));
  return absl::OkStatus();
}

absl::Status CudaTransformerStage::BackwardInput(const ExecutionContext& ctx, int microbatch,
                                                 ConstBytes output_grad, StashView stash,
                                                 MutableBytes input_grad) {
  const StageSizes sizes = Sizes();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("output_grad", output_grad.size(), part_.loss ? 0 : sizes.output_bytes,
                        part_.loss));
  ASSIGN_OR_RETURN(const StashSegments st, Segments(stash, sizes));
  RETURN_IF_ERROR(Check("input_grad", input_grad.size(),
                        part_.embedding ? 0 : sizes.input_bytes, part_.embedding));
  RETURN_IF_ERROR(Bind(ctx));
  const TransformerBlockShape& s = options_.shape;
  const reference_cuda::CudaLayerContext lc{&s, device_->blas,
                                            static_cast<cudaStream_t>(ctx.stream), &device_->ws};
  float* pending = static_cast<float*>(device_->pending.get());
  const Bf16* all = static_cast<const Bf16*>(device_->params.get());
  const Bf16* layer_params = all + (part_.embedding ? EmbeddingParamFloats(s) : 0);
  if (part_.loss) {
    const float scale = static_cast<float>(layout_.loss_scale() / static_cast<double>(s.rows()));
    RETURN_IF_ERROR(reference_cuda::CudaLossHeadBackwardInput(
        lc, layer_params + part_.layers * DecoderLayerParamFloats(s),
        static_cast<const int64_t*>(device_->targets.get()) + microbatch * s.rows(), scale,
        LayerStash(st, part_.layers), pending + 2 * s.hidden * part_.layers));
  }
  for (int i = part_.layers - 1; i >= 0; --i) {
    RETURN_IF_ERROR(reference_cuda::CudaDecoderBackwardInput(
        lc, layer_params + i * DecoderLayerParamFloats(s),
        reinterpret_cast<const Bf16*>(LayerOutputGrad(st, i, output_grad)), LayerStash(st, i),
        pending + 2 * s.hidden * i));
  }
  if (!input_grad.empty()) {  // the first layer's input gradient (or the head's)
    CUDA_CALL(cudaMemcpyAsync(input_grad.data(), st.front().data(), input_grad.size(),
                              cudaMemcpyDeviceToDevice, lc.stream));
  }
  return absl::OkStatus();
}

absl::Status CudaTransformerStage::BackwardWeight(const ExecutionContext& ctx, int microbatch,
                                                  ConstBytes input, ConstBytes output_grad,
                                                  StashView stash, MutableBytes param_grad) {
  const StageSizes sizes = Sizes();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), sizes.input_bytes, false));
  RETURN_IF_ERROR(Check("output_grad", output_grad.size(), part_.loss ? 0 : sizes.output_bytes,
                        part_.loss));
  ASSIGN_OR_RETURN(const StashSegments st, Segments(stash, sizes));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), sizes.param_grad_bytes, false));
  RETURN_IF_ERROR(Bind(ctx));
  const TransformerBlockShape& s = options_.shape;
  const reference_cuda::CudaLayerContext lc{&s, device_->blas,
                                            static_cast<cudaStream_t>(ctx.stream), &device_->ws};
  float* g = As<float>(param_grad);
  float* pending = static_cast<float*>(device_->pending.get());
  if (part_.embedding) {
    const std::byte* dy = part_.layers > 0 || part_.loss ? st.front().data() : output_grad.data();
    CUDA_CALL(reference_cuda::LaunchEmbeddingBackwardWeight(
        As<int64_t>(input), reinterpret_cast<const Bf16*>(dy), s.rows(), s.hidden, g, lc.stream));
    g += EmbeddingParamFloats(s);
  }
  for (int i = 0; i < part_.layers; ++i) {
    RETURN_IF_ERROR(reference_cuda::CudaDecoderBackwardWeight(
        lc, reinterpret_cast<const Bf16*>(LayerOutputGrad(st, i, output_grad)),
        LayerStash(st, i), g));
    RETURN_IF_ERROR(reference_cuda::CudaAddDecoderNormGrads(lc, pending + 2 * s.hidden * i, g));
    g += DecoderLayerParamFloats(s);
  }
  if (part_.loss) {
    RETURN_IF_ERROR(
        reference_cuda::CudaLossHeadBackwardWeight(lc, LayerStash(st, part_.layers), g));
    CUDA_CALL(reference_cuda::LaunchAddInto(pending + 2 * s.hidden * part_.layers, s.hidden, g,
                                               lc.stream));
  }
  if (device_->pending_floats > 0) {
    CUDA_CALL(cudaMemsetAsync(pending, 0, device_->pending_floats * sizeof(float), lc.stream));
  }
  return absl::OkStatus();
}

double CudaTransformerStage::Loss(int microbatch) const {
  if (!part_.loss || microbatch < 0 || microbatch >= layout_.microbatches_per_chain()) return 0;
  return static_cast<const double*>(device_->host_losses.get())[microbatch];
}

absl::Status CudaTransformerStage::FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) {
  RETURN_IF_ERROR(RequireDeviceStream(ctx, Who(stage_), device_->ordinal));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), Sizes().param_grad_bytes, false));
  if (finished_ == nullptr) return absl::OkStatus();
  CUDA_CALL(cudaMemcpyAsync(finished_->grads.get(), param_grad.data(), param_grad.size(),
                            cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(ctx.stream)));
  finished_->written = true;
  return absl::OkStatus();
}

CudaTransformerStageFactory::CudaTransformerStageFactory(const TransformerOptions& options,
                                                         const MlpLayout& layout)
    : options_(options),
      layout_(layout),
      slots_(static_cast<size_t>(layout.num_stages()) * layout.dp) {}

CudaTransformerStageFactory::~CudaTransformerStageFactory() = default;

absl::StatusOr<std::unique_ptr<Stage>> CudaTransformerStageFactory::Make(int stage, int replica) {
  RETURN_IF_ERROR(ValidateCudaTransformerOptions(options_));
  if (stage < 0 || stage >= layout_.num_stages() || replica < 0 || replica >= layout_.dp) {
    return absl::InvalidArgumentError(absl::StrCat("cuda transformer: no stage ", stage,
                                                   " of replica ", replica, " in a pipeline of ",
                                                   layout_.num_stages(), " stages x dp ",
                                                   layout_.dp));
  }
  RETURN_IF_ERROR(reference_cuda::UsableDevice(Who(stage)).status());
  TransformerGradSlot* slot = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto& owned = slots_[static_cast<size_t>(replica) * layout_.num_stages() + stage];
    if (owned == nullptr) {
      auto fresh = std::make_unique<TransformerGradSlot>();
      fresh->floats =
          PartParamFloats(options_.shape, options_.parts[stage % layout_.stages_per_chain]);
      absl::StatusOr<reference_cuda::Pinned> grads =
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
  ASSIGN_OR_RETURN(std::unique_ptr<CudaTransformerStage> made,
                   CudaTransformerStage::Create(options_, layout_, stage, replica, slot));
  return std::unique_ptr<Stage>(std::move(made));
}

std::vector<float> CudaTransformerStageFactory::FinishedGrads(int stage, int replica) const {
  if (stage < 0 || stage >= layout_.num_stages() || replica < 0 || replica >= layout_.dp) return {};
  absl::MutexLock lock(&mu_);
  const TransformerGradSlot* slot =
      slots_[static_cast<size_t>(replica) * layout_.num_stages() + stage].get();
  if (slot == nullptr || !slot->written) return {};
  const float* g = static_cast<const float*>(slot->grads.get());
  return std::vector<float>(g, g + slot->floats);
}

}  // namespace jitpipe
