// The CUDA mlp stage. On the host, always: error conversion, sizes, the
// stored encodings, the initial parameters and data it copies to the device,
// the refusal of a host context, the factory without a device. On a CUDA
// device (skipped without one): every stage's forward and backward and a
// whole unpipelined step against the CPU reference, in fp32 and bf16, the
// split backward, a step captured as a CUDA graph, and the call checks.
#include "stages/reference/cuda_mlp_stage.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "comm/cuda/cuda_error.h"
#include "stages/reference/cublas_error.h"
#include "stages/reference/cuda_mlp_gemm.h"
#include "stages/reference/mlp_kernels.h"
#include "stages/reference/mlp_reference.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::cuda_mlp_stage_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------- host side

// The reference stage's CUDA runtime calls convert as the backends' do
// (comm/cuda/cuda_error.h): one code for "no usable device" everywhere.
TEST(CudaCheckTest, CudaErrorsBecomeStatusAsTheBackendsDo) {
  EXPECT_OK(CudaStatus(cudaSuccess, "cudaFree(p)", __FILE__, __LINE__));
  const absl::Status s =
      CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, 4)", "/src/stages/reference/x.cc", 12);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Message(s), "cudaMalloc: cudaErrorMemoryAllocation: out of memory "
                        "(stages/reference/x.cc:12)");
  for (cudaError_t no_device : {cudaErrorNoDevice, cudaErrorInsufficientDriver,
                                cudaErrorNoKernelImageForDevice, cudaErrorUnsupportedPtxVersion}) {
    EXPECT_EQ(CudaStatus(no_device, "f()", "f.cc", 1).code(), absl::StatusCode::kUnavailable)
        << cudaGetErrorName(no_device);
  }
  EXPECT_EQ(CudaStatus(cudaErrorIllegalAddress, "f()", "f.cc", 1).code(),
            absl::StatusCode::kInternal);
}

TEST(CudaCheckTest, CublasErrorsBecomeStatusWithCallFileAndLine) {
  EXPECT_OK(CublasStatus(CUBLAS_STATUS_SUCCESS, "cublasCreate(&h)", __FILE__, __LINE__));
  const absl::Status s =
      CublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx(h, ...)", "stages/reference/y.cc", 7);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(s),
            "cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED: the requested functionality is not "
            "supported (stages/reference/y.cc:7)");
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "f()", "f.cc", 1).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "f()", "f.cc", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_EXECUTION_FAILED, "f()", "f.cc", 1).code(),
            absl::StatusCode::kInternal);
}

// The macros return the first failure, naming this file and line.
absl::Status TwoCalls(int& reached, int& failing_line) {
  CUDA_CALL(cudaSuccess);
  ++reached;
  failing_line = __LINE__ + 1;
  CUBLAS_CALL((static_cast<cublasStatus_t>(CUBLAS_STATUS_ALLOC_FAILED)));
  ++reached;
  return absl::OkStatus();
}

TEST(CudaCheckTest, MacrosReturnTheFirstFailure) {
  int reached = 0, line = 0;
  const absl::Status s = TwoCalls(reached, line);
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(s), StartsWith("static_cast<cublasStatus_t>: CUBLAS_STATUS_ALLOC_FAILED: "));
  EXPECT_THAT(Message(s),
              HasSubstr(absl::StrCat("(tests/stages/reference/cuda_mlp_stage_test.cc:", line, ")")));
}

// The error MlpComparison uses: max |got - want| / max |want|.
double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double largest = 0, worst = 0;
  for (size_t k = 0; k < std::min(got.size(), want.size()); ++k) {
    largest = std::max(largest, std::abs(double{want[k]}));
    worst = std::max(worst, std::abs(double{got[k]} - double{want[k]}));
  }
  return worst / std::max(largest, 1e-300);
}

// BLAS semantics on the host: C = op(A) op(B) + beta C, column-major, after
// the argument checks cuBLAS makes (CUBLAS_STATUS_INVALID_VALUE otherwise).
void HostGemm(const reference_cuda::GemmCall& c, const float* a, const float* b, float* out) {
  ASSERT_GE(c.lda, std::max(1, c.transpose_a ? c.k : c.m));
  ASSERT_GE(c.ldb, std::max(1, c.transpose_b ? c.n : c.k));
  ASSERT_GE(c.ldc, std::max(1, c.m));
  for (int j = 0; j < c.n; ++j) {
    for (int i = 0; i < c.m; ++i) {
      double sum = 0;
      for (int p = 0; p < c.k; ++p) {
        const float av = c.transpose_a ? a[p + i * c.lda] : a[i + p * c.lda];
        const float bv = c.transpose_b ? b[j + p * c.ldb] : b[p + j * c.ldb];
        sum += static_cast<double>(av) * bv;
      }
      float& o = out[i + j * c.ldc];
      o = static_cast<float>(sum + c.beta * o);
    }
  }
}

// The GEMM calls the stage makes compute what the CPU kernels compute, on
// shapes where rows and hidden differ (a swapped dimension or transpose
// shows).
TEST(CudaMlpGemmTest, TheThreeProductsAreTheCpuKernels) {
  for (const MlpShape shape : {MlpShape{4, 3, 1}, MlpShape{24, 5, 1}, MlpShape{8, 16, 1}}) {
    SCOPED_TRACE(absl::StrCat("hidden ", shape.hidden, ", rows ", shape.rows));
    const int64_t n = shape.activation_floats(), weights = int64_t{shape.hidden} * shape.hidden;
    std::vector<float> params = MlpInitialParams(shape, 2, 0);
    std::fill(params.begin() + weights, params.end(), 0.0f);  // no bias: z = a W exactly
    std::vector<float> a(n), dz(n);
    MlpFill(shape, 2, MlpData::kInput, 0, 0, 0, a.data());
    MlpFill(shape, 2, MlpData::kTarget, 0, 0, 0, dz.data());

    std::vector<float> z(n), cpu_z(n);
    MlpBlockForward(shape, params.data(), a.data(), cpu_z.data(), /*linear_head=*/true);
    HostGemm(reference_cuda::ForwardGemm(shape), params.data(), a.data(), z.data());
    EXPECT_LE(RelativeError(z, cpu_z), 1e-6) << "forward";

    std::vector<float> g(n), cpu_g(n), copy(n);
    MlpBlockBackwardInput(shape, params.data(), a.data(), dz.data(), copy.data(), cpu_g.data(),
                          /*linear_head=*/true);
    HostGemm(reference_cuda::InputGradGemm(shape), params.data(), dz.data(), g.data());
    EXPECT_LE(RelativeError(g, cpu_g), 1e-6) << "input gradient";

    std::vector<float> grads(shape.block_params(), 0.5f), gw(weights, 0.5f);
    MlpBlockBackwardWeight(shape, a.data(), nullptr, dz.data(), grads.data());
    HostGemm(reference_cuda::WeightGradGemm(shape), dz.data(), a.data(), gw.data());
    EXPECT_LE(RelativeError(gw, std::vector<float>(grads.begin(), grads.begin() + weights)), 1e-6)
        << "weight gradient (accumulated)";
  }
}

constexpr MlpShape kShape{4, 3, 2};  // hidden 4, rows 3, layers 2
const MlpLayout kLayout{2, 1, 2, 2};  // two blocks, one chain, 2 microbatches, dp 2

CudaMlpOptions Options(Dtype dtype, MlpShape shape = kShape, uint64_t seed = 1) {
  return CudaMlpOptions{MlpOptions{shape, seed}, dtype};
}

TEST(CudaMlpStageTest, SizesFollowTheDtypeAndGradientsStayFp32) {
  const StageSizes fp32 = CudaMlpSizes(Options(Dtype::kFp32));
  const StageSizes cpu = MlpStage({kShape, 1}, kLayout, 0, 0, nullptr).Sizes();
  EXPECT_EQ(fp32.input_bytes, cpu.input_bytes);
  EXPECT_EQ(fp32.output_bytes, cpu.output_bytes);
  EXPECT_EQ(fp32.stash_bytes, cpu.stash_bytes);
  EXPECT_EQ(fp32.param_grad_bytes, cpu.param_grad_bytes);
  const StageSizes bf16 = CudaMlpSizes(Options(Dtype::kBf16));
  EXPECT_EQ(bf16.input_bytes, 3 * 4 * 2);
  EXPECT_EQ(bf16.output_bytes, 3 * 4 * 2);
  EXPECT_EQ(bf16.stash_bytes, 2 * 2 * 3 * 4 * 2);
  EXPECT_EQ(bf16.param_grad_bytes, 2 * (16 + 4) * 4);
}

TEST(CudaMlpStageTest, OptionsAreValidated) {
  EXPECT_OK(ValidateCudaMlpOptions(Options(Dtype::kFp32)));
  EXPECT_OK(ValidateCudaMlpOptions(Options(Dtype::kBf16)));
  const absl::Status fp16 = ValidateCudaMlpOptions(Options(Dtype::kFp16));
  EXPECT_EQ(fp16.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(fp16), "cuda mlp: dtype fp16 is not supported; expected fp32 or bf16");
  EXPECT_EQ(Message(ValidateCudaMlpOptions(Options(Dtype::kFp32, MlpShape{4, 0, 2}))),
            "cuda mlp: shape hidden 4, rows 0, layers 2; each must be at least 1");
}

std::vector<uint16_t> Halves(const std::vector<std::byte>& bytes) {
  std::vector<uint16_t> out(bytes.size() / 2);
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = static_cast<uint16_t>(static_cast<unsigned>(bytes[2 * k]) |
                                   static_cast<unsigned>(bytes[2 * k + 1]) << 8);
  }
  return out;
}

TEST(CudaMlpEncodingTest, Bf16RoundsToNearestEven) {
  const float u = std::ldexp(1.0f, -8);  // half a bf16 step at 1
  const std::vector<float> values = {1.0f,           1.0f + u,    1.0f + 3 * u,
                                     1.0f + u + u / 4096, -2.0f,  0.0f};
  const std::vector<std::byte> bytes = EncodeFloats(values, Dtype::kBf16);
  // Ties go to the even neighbour (1 + u -> 1, 1 + 3u -> 1 + 4u); above a tie, up.
  EXPECT_THAT(Halves(bytes), ::testing::ElementsAre(0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC000, 0));
  EXPECT_THAT(DecodeFloats(ConstBytes(bytes.data(), bytes.size()), Dtype::kBf16),
              ::testing::ElementsAre(1.0f, 1.0f, 1.0f + 4 * u, 1.0f + 2 * u, -2.0f, 0.0f));
  const std::vector<std::byte> fp32 = EncodeFloats(values, Dtype::kFp32);
  ASSERT_EQ(fp32.size(), values.size() * 4);
  EXPECT_EQ(std::memcmp(fp32.data(), values.data(), fp32.size()), 0);
  EXPECT_EQ(DecodeFloats(ConstBytes(fp32.data(), fp32.size()), Dtype::kFp32), values);
}

// What is copied to the device is the CPU generator's parameters, layer by
// layer W [in x out] then b, in the stored dtype.
TEST(CudaMlpStageTest, InitialParametersAreTheCpuGeneratorsInTheStoredDtype) {
  const int block = 1;
  const std::vector<float> cpu = MlpInitialParams(kShape, 7, block);
  const std::vector<std::byte> fp32 = CudaMlpInitialParams(Options(Dtype::kFp32, kShape, 7), block);
  EXPECT_EQ(DecodeFloats(ConstBytes(fp32.data(), fp32.size()), Dtype::kFp32), cpu);
  const std::vector<std::byte> bf16 = CudaMlpInitialParams(Options(Dtype::kBf16, kShape, 7), block);
  ASSERT_EQ(bf16.size(), cpu.size() * 2);
  const std::vector<float> stored = DecodeFloats(ConstBytes(bf16.data(), bf16.size()), Dtype::kBf16);
  const float weight_scale = 1.5f / 2.0f;  // 1.5 / sqrt(hidden)
  for (int l = 0; l < kShape.layers; ++l) {
    const uint64_t layer = static_cast<uint64_t>(block) * kShape.layers + l;
    for (int k = 0; k < kShape.hidden * kShape.hidden + kShape.hidden; ++k) {
      const bool weight = k < kShape.hidden * kShape.hidden;
      const float want = weight ? weight_scale * MlpUniform(7, MlpData::kWeight, layer, 0, 0, k)
                                : 0.1f * MlpUniform(7, MlpData::kBias, layer, 0, 0,
                                                    k - kShape.hidden * kShape.hidden);
      const size_t at = static_cast<size_t>(l * kShape.layer_params() + k);
      EXPECT_EQ(cpu[at], want) << "layer " << l << " element " << k;
      EXPECT_NEAR(stored[at], want, std::abs(want) * std::ldexp(1.0, -8)) << "layer " << l << " (bf16 unit roundoff 2^-8)";
    }
  }
}

TEST(CudaMlpStageTest, DataHoldsEveryMicrobatchOfTheChainInOrder) {
  const int64_t n = kShape.activation_floats();
  for (Dtype dtype : {Dtype::kFp32, Dtype::kBf16}) {
    const std::vector<std::byte> inputs = CudaMlpData(Options(dtype), MlpData::kInput, 1, 0, 3);
    ASSERT_EQ(inputs.size(), static_cast<size_t>(3 * n * DtypeBytes(dtype)));
    const std::vector<std::byte> targets = CudaMlpData(Options(dtype), MlpData::kTarget, 1, 0, 3);
    ASSERT_EQ(targets.size(), static_cast<size_t>(3 * n * 4)) << "targets stay fp32";
    const std::vector<float> in = DecodeFloats(ConstBytes(inputs.data(), inputs.size()), dtype);
    const std::vector<float> t = DecodeFloats(ConstBytes(targets.data(), targets.size()), Dtype::kFp32);
    std::vector<float> want(n);
    for (int m = 0; m < 3; ++m) {
      MlpFill(kShape, 1, MlpData::kInput, 1, 0, m, want.data());
      for (int64_t k = 0; k < n; ++k) {
        EXPECT_NEAR(in[m * n + k], want[k], std::abs(want[k]) * std::ldexp(1.0, -8));
      }
      MlpFill(kShape, 1, MlpData::kTarget, 1, 0, m, want.data());
      EXPECT_EQ(std::vector<float>(t.begin() + m * n, t.begin() + (m + 1) * n), want);
    }
  }
}

TEST(CudaMlpStageTest, RequireDeviceStreamRefusesAHostContextNamingTheStage) {
  const absl::Status host = RequireDeviceStream(ExecutionContext{}, "cuda mlp stage 2", 0);
  EXPECT_EQ(host.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(host),
            "cuda mlp stage 2 computes on CUDA device 0; this rank's buffers are in host memory");
  int stream = 0;
  EXPECT_EQ(Message(RequireDeviceStream({MemorySpace::kHost, -1, &stream}, "s", 0)),
            "s computes on CUDA device 0; this rank's buffers are in host memory");
  const absl::Status no_stream =
      RequireDeviceStream({MemorySpace::kDevice, 0, nullptr}, "cuda mlp stage 1", 0);
  EXPECT_EQ(no_stream.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(no_stream),
            "cuda mlp stage 1 enqueues its work on a stream; this rank's context has none");
  EXPECT_EQ(Message(RequireDeviceStream({MemorySpace::kDevice, 1, &stream}, "s", 0)),
            "s computes on CUDA device 0; this rank's context is device 1");
  EXPECT_OK(RequireDeviceStream({MemorySpace::kDevice, 1, &stream}, "s", 1));
}

// The number of usable devices; 0 without a device or a driver, with the
// reason in `why`.
int DeviceCount(std::string* why = nullptr) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = cudaGetErrorName(error);
    return 0;
  }
  if (why != nullptr) *why = "no devices";
  return count;
}

TEST(CudaMlpStageFactoryTest, MakeNeedsAStageOfTheLayoutAndADevice) {
  CudaMlpStageFactory factory(Options(Dtype::kFp32), kLayout);
  EXPECT_EQ(Message(factory.Make(2, 0)),
            "cuda mlp: no stage 2 of replica 0 in a pipeline of 2 stages x dp 2");
  EXPECT_EQ(Message(factory.Make(0, 2)),
            "cuda mlp: no stage 0 of replica 2 in a pipeline of 2 stages x dp 2");
  absl::StatusOr<std::unique_ptr<Stage>> made = factory.Make(1, 1);
  if (DeviceCount() == 0) {
    EXPECT_EQ(made.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(Message(made), StartsWith("cuda mlp stage 1: no usable CUDA device ("));
  } else {
    EXPECT_OK(made);
  }
  EXPECT_TRUE(factory.FinishedGrads(1, 1).empty());
  EXPECT_TRUE(factory.FinishedGrads(5, 0).empty());
  CudaMlpStageFactory fp16(Options(Dtype::kFp16), kLayout);
  EXPECT_EQ(fp16.Make(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// The device's arithmetic on the host: the CPU kernels one layer at a time,
// with every tensor the device stores (parameters, inputs, each layer's
// output and dz, the gradient passed between stages) rounded to the dtype.
// Per stage (chain x stages_per_chain + block): its gradients.
struct EmulatedStep {
  double loss = 0;
  std::vector<std::vector<float>> stage_grads;
};

EmulatedStep EmulateStep(const CudaMlpOptions& options, const MlpLayout& layout) {
  const MlpShape& s = options.mlp.shape;
  const MlpShape one{s.hidden, s.rows, 1};
  const int64_t n = s.activation_floats(), lp = s.layer_params();
  const int blocks = layout.stages_per_chain, top = s.layers - 1;
  auto round = [&](const std::vector<float>& v) {
    const std::vector<std::byte> b = EncodeFloats(v, options.dtype);
    return DecodeFloats(ConstBytes(b.data(), b.size()), options.dtype);
  };
  EmulatedStep out;
  out.stage_grads.assign(layout.num_stages(), std::vector<float>(s.block_params(), 0.0f));
  std::vector<std::vector<float>> params;
  for (int b = 0; b < blocks; ++b) params.push_back(round(MlpInitialParams(s, options.mlp.seed, b)));
  std::vector<float> x(n), t(n), g(n), dz(n), copy(n);
  // Replicas k, chains c, microbatches m; blocks b, layers l; acts[b][l].
  for (int k = 0; k < layout.dp; ++k) {
    for (int c = 0; c < layout.chains; ++c) {
      for (int m = 0; m < layout.microbatches_per_chain(); ++m) {
        MlpFill(s, options.mlp.seed, MlpData::kInput, k, c, m, x.data());
        x = round(x);
        std::vector<std::vector<std::vector<float>>> acts(
            blocks, std::vector<std::vector<float>>(s.layers, std::vector<float>(n)));
        auto input_of = [&](int b, int l) -> const std::vector<float>& {
          return l > 0 ? acts[b][l - 1] : (b > 0 ? acts[b - 1][top] : x);
        };
        for (int b = 0; b < blocks; ++b) {
          for (int l = 0; l < s.layers; ++l) {
            MlpBlockForward(one, params[b].data() + l * lp, input_of(b, l).data(),
                            acts[b][l].data(), b == blocks - 1 && l == top);
            acts[b][l] = round(acts[b][l]);
          }
        }
        MlpFill(s, options.mlp.seed, MlpData::kTarget, k, c, m, t.data());
        out.loss += MlpLoss(s, acts[blocks - 1][top].data(), t.data(), layout.loss_scale(),
                            g.data());
        g = round(g);  // the last layer's dz (linear head)
        for (int b = blocks - 1; b >= 0; --b) {
          for (int l = top; l >= 0; --l) {
            const float* w = params[b].data() + l * lp;
            if (b == blocks - 1 && l == top) {
              dz = g;
            } else {
              MlpBlockBackwardInput(one, w, acts[b][l].data(), g.data(), dz.data(), nullptr, false);
              dz = round(dz);
            }
            // As a linear layer: copies dz and computes g = dz W^T, in fp32.
            MlpBlockBackwardInput(one, w, acts[b][l].data(), dz.data(), copy.data(), g.data(), true);
            MlpBlockBackwardWeight(one, input_of(b, l).data(), nullptr, dz.data(),
                                   out.stage_grads[c * blocks + b].data() + l * lp);
          }
          g = round(g);  // the stage's input gradient
        }
      }
    }
  }
  return out;
}

// The stated bf16 bounds hold for an exact emulation of the device's
// roundings (the fp32 emulation, checked against the reference trainer
// first, shows the emulation itself is the model). What a GPU adds is only
// fp32 summation order and tanhf's last bit.
TEST(CudaMlpToleranceTest, Bf16BoundsHoldForAHostEmulationOfTheDeviceRoundings) {
  struct Case {
    MlpShape shape;
    MlpLayout layout;
  };
  const Case cases[] = {{MlpShape{24, 5, 3}, MlpLayout{3, 2, 8, 1}},
                        {MlpShape{64, 16, 2}, MlpLayout{2, 1, 4, 1}},
                        {MlpShape{16, 4, 2}, MlpLayout{2, 1, 2, 1}}};
  double worst_loss = 0, worst_grad = 0;
  for (const Case& c : cases) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE(absl::StrCat("hidden ", c.shape.hidden, ", seed ", seed));
      const MlpReference reference = RunMlpReference(MlpOptions{c.shape, seed}, c.layout);
      for (Dtype dtype : {Dtype::kFp32, Dtype::kBf16}) {
        const EmulatedStep step = EmulateStep(Options(dtype, c.shape, seed), c.layout);
        ASSERT_OK_AND_ASSIGN(
            MlpComparison got,
            CompareWithReference(
                reference, step.loss, c.layout,
                [&](int stage, int) { return step.stage_grads[stage]; }, ReduceKind::kAllReduce));
        if (dtype == Dtype::kFp32) {
          EXPECT_TRUE(got.Within(kCudaMlpFp32Tolerance)) << got.ToString();
          continue;
        }
        EXPECT_LE(got.loss_error, kCudaMlpBf16LossTolerance) << got.ToString();
        EXPECT_LE(got.worst_grad_error, kCudaMlpBf16Tolerance) << got.ToString();
        EXPECT_GT(got.worst_grad_error, kCudaMlpFp32Tolerance) << "bf16 must show";
        worst_loss = std::max(worst_loss, got.loss_error);
        worst_grad = std::max(worst_grad, got.worst_grad_error);
      }
    }
  }
  std::cout << "[ emulated ] bf16 worst loss error " << worst_loss << ", worst gradient error "
            << worst_grad << "\n";
}

// ------------------------------------------------------------- device side

// Device memory for a test; freed at scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) {
      EXPECT_EQ(cudaMalloc(&data_, bytes), cudaSuccess);
    }
    if (data_ != nullptr) {
      EXPECT_EQ(cudaMemset(data_, 0, bytes), cudaSuccess);
    }
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  MutableBytes bytes() { return {static_cast<std::byte*>(data_), data_ == nullptr ? 0 : bytes_}; }
  void Upload(const std::vector<std::byte>& from) {
    ASSERT_EQ(from.size(), bytes_);
    ASSERT_EQ(cudaMemcpy(data_, from.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  // The whole buffer, or `count` bytes from `offset`.
  std::vector<std::byte> Download(size_t offset = 0, size_t count = SIZE_MAX) const {
    count = std::min(count, bytes_ - offset);
    std::vector<std::byte> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), static_cast<const std::byte*>(data_) + offset, count,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

MutableBytes AsBytes(std::vector<float>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size() * sizeof(float)};
}
std::vector<std::byte> FloatBytes(const std::vector<float>& v) {
  return EncodeFloats(v, Dtype::kFp32);
}

std::vector<float> Slice(const std::vector<float>& v, int64_t begin, int64_t count) {
  return std::vector<float>(v.begin() + begin, v.begin() + begin + count);
}

// Deterministic values in [-1, 1) for buffers the test makes up.
std::vector<float> Made(int64_t count, int salt) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out[k] = MlpUniform(99, MlpData::kInput, 7, 7, salt, k);
  return out;
}

// An odd shape, so that rows, hidden and their transposes cannot be confused.
constexpr MlpShape kDeviceShape{24, 5, 3};

class CudaMlpDeviceTest : public ::testing::TestWithParam<Dtype> {
 protected:
  void SetUp() override {
    std::string why;
    if (DeviceCount(&why) == 0) {
      GTEST_SKIP() << "no CUDA device (" << why << "): this case runs on a GPU";
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    // A blocking stream: ordered with the default stream the test's
    // synchronous copies use.
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Dtype dtype() const { return GetParam(); }
  int element_bytes() const { return DtypeBytes(GetParam()); }
  double tolerance() const {
    return dtype() == Dtype::kBf16 ? kCudaMlpBf16Tolerance : kCudaMlpFp32Tolerance;
  }
  double loss_tolerance() const {
    return dtype() == Dtype::kBf16 ? kCudaMlpBf16LossTolerance : kCudaMlpFp32Tolerance;
  }
  ExecutionContext context() const { return {MemorySpace::kDevice, 0, stream_}; }
  void Sync() { ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }
  std::vector<float> Read(const DeviceBuffer& b, size_t offset = 0, size_t count = SIZE_MAX) {
    const std::vector<std::byte> bytes = b.Download(offset, count);
    return DecodeFloats(ConstBytes(bytes.data(), bytes.size()), dtype());
  }

  cudaStream_t stream_ = nullptr;
};

// Every stage of a three-block chain, replica 1, microbatch 1: what the
// device computes against what the CPU stage computes from the same fp32
// values (the device reads them rounded to the dtype).
TEST_P(CudaMlpDeviceTest, EveryStageMatchesTheCpuStage) {
  const MlpLayout layout{3, 1, 2, 2};
  const CudaMlpOptions options = Options(dtype(), kDeviceShape, 5);
  const MlpShape& s = kDeviceShape;
  const int64_t n = s.activation_floats();
  const size_t activation = static_cast<size_t>(n) * element_bytes();
  const int m = 1, replica = 1;
  for (int stage = 0; stage < 3; ++stage) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    const bool first = stage == 0, last = stage == 2;
    MlpStage cpu(options.mlp, layout, stage, replica, nullptr);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaMlpStage> gpu,
                         CudaMlpStage::Create(options, layout, stage, replica, nullptr));
    const ExecutionContext host;
    std::vector<float> x(n), y(n), stash(2 * s.layers * n), grad_in(first ? 0 : n);
    DeviceBuffer dx(activation), dy(activation), dstash(2 * s.layers * activation),
        dgrad_in(first ? 0 : activation), dgrad_out(last ? 0 : activation);
    if (first) {
      ASSERT_OK(cpu.LoadInput(host, m, AsBytes(x)));
      ASSERT_OK(gpu->LoadInput(context(), m, dx.bytes()));
      Sync();
      const std::vector<std::byte> loaded = dx.Download();
      EXPECT_EQ(loaded, EncodeFloats(x, dtype())) << "LoadInput copies the stored input";
    } else {
      x = Made(n, stage);
      dx.Upload(EncodeFloats(x, dtype()));
    }
    ASSERT_OK(cpu.Forward(host, m, AsBytes(x), AsBytes(y), AsBytes(stash)));
    ASSERT_OK(gpu->Forward(context(), m, dx.bytes(), dy.bytes(), dstash.bytes()));
    Sync();
    EXPECT_LE(RelativeError(Read(dy), y), tolerance()) << "output";
    EXPECT_LE(RelativeError(Read(dstash, 0, s.layers * activation), Slice(stash, 0, s.layers * n)),
              tolerance())
        << "saved activations";
    if (last) {
      EXPECT_LE(std::abs(gpu->Loss(m) - cpu.Loss(m)) / cpu.Loss(m), loss_tolerance()) << "loss";
      EXPECT_EQ(gpu->Loss(0), 0.0) << "microbatch 0 has not run";
    }

    std::vector<float> grad_out = last ? std::vector<float>() : Made(n, 10 + stage);
    if (!last) dgrad_out.Upload(EncodeFloats(grad_out, dtype()));
    ASSERT_OK(cpu.BackwardInput(host, m, AsBytes(grad_out), AsBytes(stash), AsBytes(grad_in)));
    ASSERT_OK(gpu->BackwardInput(context(), m, dgrad_out.bytes(), dstash.bytes(),
                                 dgrad_in.bytes()));
    Sync();
    EXPECT_LE(RelativeError(Read(dstash, s.layers * activation), Slice(stash, s.layers * n,
                                                                        s.layers * n)),
              tolerance())
        << "dz in the stash";
    if (!first) {
      EXPECT_LE(RelativeError(Read(dgrad_in), grad_in), tolerance()) << "input grad";
    }

    // W accumulates: both start from the same non-zero gradients.
    const std::vector<float> before = Made(s.block_params(), 20);
    std::vector<float> grads = before;
    DeviceBuffer dgrads(grads.size() * sizeof(float));
    dgrads.Upload(FloatBytes(grads));
    ASSERT_OK(cpu.BackwardWeight(host, m, AsBytes(x), AsBytes(grad_out), AsBytes(stash),
                                 AsBytes(grads)));
    ASSERT_OK(gpu->BackwardWeight(context(), m, dx.bytes(), dgrad_out.bytes(), dstash.bytes(),
                                  dgrads.bytes()));
    Sync();
    const std::vector<std::byte> got_bytes = dgrads.Download();
    std::vector<float> got = DecodeFloats(ConstBytes(got_bytes.data(), got_bytes.size()),
                                          Dtype::kFp32);
    for (size_t k = 0; k < got.size(); ++k) {
      got[k] -= before[k];
      grads[k] -= before[k];
    }
    EXPECT_LE(RelativeError(got, grads), tolerance()) << "weight gradients";
  }
}

// The chain's stages run microbatch by microbatch as the reference trainer
// does (DualPipe's two chains, one replica), half the backwards split into I
// and W; the step's loss and FinishStep gradients against RunMlpReference.
TEST_P(CudaMlpDeviceTest, AWholeUnpipelinedStepMatchesTheReferenceTrainer) {
  const MlpLayout layout{3, 2, 8, 1};
  const CudaMlpOptions options = Options(dtype(), kDeviceShape, 3);
  const MlpShape& s = kDeviceShape;
  const size_t activation = static_cast<size_t>(s.activation_floats()) * element_bytes();
  CudaMlpStageFactory factory(options, layout);
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<DeviceBuffer>> outs, stashes, grads_in, param_grads;
  for (int stage = 0; stage < layout.num_stages(); ++stage) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> made, factory.Make(stage, 0));
    stages.push_back(std::move(made));
    outs.push_back(std::make_unique<DeviceBuffer>(activation));
    stashes.push_back(std::make_unique<DeviceBuffer>(2 * s.layers * activation));
    grads_in.push_back(std::make_unique<DeviceBuffer>(activation));
    param_grads.push_back(std::make_unique<DeviceBuffer>(s.block_params() * sizeof(float)));
  }
  DeviceBuffer x(activation);
  const ExecutionContext ctx = context();
  // Chains c, microbatches m of the chain, blocks b (stage c x 3 + b).
  for (int c = 0; c < layout.chains; ++c) {
    for (int m = 0; m < layout.microbatches_per_chain(); ++m) {
      const int base = c * layout.stages_per_chain;
      ASSERT_OK(stages[base]->LoadInput(ctx, m, x.bytes()));
      for (int b = 0; b < layout.stages_per_chain; ++b) {
        const bool last = b == layout.stages_per_chain - 1;
        MutableBytes in = b == 0 ? x.bytes() : outs[base + b - 1]->bytes();
        ASSERT_OK(stages[base + b]->Forward(ctx, m, in, last ? MutableBytes() : outs[base + b]->bytes(),
                                            stashes[base + b]->bytes()));
      }
      for (int b = layout.stages_per_chain - 1; b >= 0; --b) {
        const int stage = base + b;
        const bool last = b == layout.stages_per_chain - 1;
        MutableBytes in = b == 0 ? x.bytes() : outs[stage - 1]->bytes();
        MutableBytes grad_out = last ? MutableBytes() : grads_in[stage + 1]->bytes();
        MutableBytes grad_in = b == 0 ? MutableBytes() : grads_in[stage]->bytes();
        if ((b + m) % 2 == 0) {
          ASSERT_OK(stages[stage]->Backward(ctx, m, in, grad_out, stashes[stage]->bytes(), grad_in,
                                            param_grads[stage]->bytes()));
        } else {
          ASSERT_OK(stages[stage]->BackwardInput(ctx, m, grad_out, stashes[stage]->bytes(),
                                                 grad_in));
          ASSERT_OK(stages[stage]->BackwardWeight(ctx, m, in, grad_out, stashes[stage]->bytes(),
                                                  param_grads[stage]->bytes()));
        }
      }
    }
  }
  for (int stage = 0; stage < layout.num_stages(); ++stage) {
    ASSERT_OK(stages[stage]->FinishStep(ctx, param_grads[stage]->bytes()));
  }
  Sync();  // the step's end: losses and finished gradients are readable now
  double loss = 0;
  for (int c = 0; c < layout.chains; ++c) {
    for (int m = 0; m < layout.microbatches_per_chain(); ++m) {
      loss += stages[c * layout.stages_per_chain + layout.stages_per_chain - 1]->Loss(m);
    }
  }
  const MlpReference reference = RunMlpReference(options.mlp, layout);
  ASSERT_OK_AND_ASSIGN(
      MlpComparison comparison,
      CompareWithReference(
          reference, loss, layout,
          [&](int stage, int replica) { return factory.FinishedGrads(stage, replica); },
          ReduceKind::kAllReduce));
  std::cout << "[ measured ] " << DtypeName(dtype()) << ": " << comparison.ToString() << "\n";
  EXPECT_LE(comparison.loss_error, loss_tolerance()) << comparison.ToString();
  EXPECT_LE(comparison.worst_grad_error, tolerance()) << comparison.ToString();
}

// On the device too, I then W gives bit for bit what B gives.
TEST_P(CudaMlpDeviceTest, SplitBackwardEqualsFullBackward) {
  const MlpLayout layout{3, 1, 2, 1};
  const CudaMlpOptions options = Options(dtype(), kDeviceShape, 4);
  const MlpShape& s = kDeviceShape;
  const size_t activation = static_cast<size_t>(s.activation_floats()) * element_bytes();
  const size_t stash_bytes = 2 * s.layers * activation;
  const size_t grad_bytes = s.block_params() * sizeof(float);
  for (int stage = 0; stage < 3; ++stage) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    const bool first = stage == 0, last = stage == 2;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaMlpStage> gpu,
                         CudaMlpStage::Create(options, layout, stage, 0, nullptr));
    DeviceBuffer x(activation), y(activation), stash(stash_bytes), stash2(stash_bytes),
        grad_out(last ? 0 : activation), grad_in(first ? 0 : activation),
        grad_in2(first ? 0 : activation), pg(grad_bytes), pg2(grad_bytes);
    x.Upload(EncodeFloats(Made(s.activation_floats(), stage), dtype()));
    if (!last) grad_out.Upload(EncodeFloats(Made(s.activation_floats(), 5 + stage), dtype()));
    ASSERT_OK(gpu->Forward(context(), 0, x.bytes(), y.bytes(), stash.bytes()));
    ASSERT_EQ(cudaMemcpyAsync(stash2.bytes().data(), stash.bytes().data(), stash_bytes,
                              cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
    ASSERT_OK(gpu->BackwardInput(context(), 0, grad_out.bytes(), stash.bytes(), grad_in.bytes()));
    ASSERT_OK(gpu->BackwardWeight(context(), 0, x.bytes(), grad_out.bytes(), stash.bytes(),
                                  pg.bytes()));
    ASSERT_OK(gpu->Backward(context(), 0, x.bytes(), grad_out.bytes(), stash2.bytes(),
                            grad_in2.bytes(), pg2.bytes()));
    Sync();
    EXPECT_EQ(stash.Download(), stash2.Download());
    EXPECT_EQ(grad_in.Download(), grad_in2.Download());
    EXPECT_EQ(pg.Download(), pg2.Download());
  }
}

// A step of a two-stage chain (load, forward, loss, both backwards, finish)
// captured as a CUDA graph: the calls enqueue only, so the capture succeeds,
// and a replay into zeroed buffers gives what the eager calls gave.
TEST_P(CudaMlpDeviceTest, AStepCapturedAsACudaGraphReplaysTheEagerResults) {
  const MlpLayout layout{2, 1, 2, 1};
  const CudaMlpOptions options = Options(dtype(), kDeviceShape, 6);
  const MlpShape& s = kDeviceShape;
  const size_t activation = static_cast<size_t>(s.activation_floats()) * element_bytes();
  const size_t grad_bytes = s.block_params() * sizeof(float);
  CudaMlpStageFactory factory(options, layout);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> a, factory.Make(0, 0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> b, factory.Make(1, 0));
  DeviceBuffer x(activation), h(activation), stash_a(2 * s.layers * activation),
      stash_b(2 * s.layers * activation), dh(activation), pg_a(grad_bytes), pg_b(grad_bytes);
  const ExecutionContext ctx = context();
  const int m = 1;
  auto step = [&]() -> absl::Status {
    RETURN_IF_ERROR(a->LoadInput(ctx, m, x.bytes()));
    RETURN_IF_ERROR(a->Forward(ctx, m, x.bytes(), h.bytes(), stash_a.bytes()));
    RETURN_IF_ERROR(b->Forward(ctx, m, h.bytes(), {}, stash_b.bytes()));
    RETURN_IF_ERROR(b->BackwardInput(ctx, m, {}, stash_b.bytes(), dh.bytes()));
    RETURN_IF_ERROR(b->BackwardWeight(ctx, m, h.bytes(), {}, stash_b.bytes(), pg_b.bytes()));
    RETURN_IF_ERROR(a->Backward(ctx, m, x.bytes(), dh.bytes(), stash_a.bytes(), {}, pg_a.bytes()));
    RETURN_IF_ERROR(a->FinishStep(ctx, pg_a.bytes()));
    return b->FinishStep(ctx, pg_b.bytes());
  };
  ASSERT_OK(step());
  Sync();
  const double eager_loss = b->Loss(m);
  const std::vector<std::byte> eager_h = h.Download(), eager_dh = dh.Download(),
                               eager_a = pg_a.Download(), eager_b = pg_b.Download();
  const std::vector<float> finished_b = factory.FinishedGrads(1, 0);
  EXPECT_EQ(EncodeFloats(finished_b, Dtype::kFp32), eager_b);

  for (DeviceBuffer* buffer : {&x, &h, &stash_a, &stash_b, &dh, &pg_a, &pg_b}) {
    ASSERT_EQ(cudaMemsetAsync(buffer->bytes().data(), 0, buffer->bytes().size(), stream_),
              cudaSuccess);
  }
  Sync();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  const absl::Status captured = step();
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_OK(captured);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(h.Download(), std::vector<std::byte>(eager_h.size())) << "capture ran nothing";
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  Sync();
  EXPECT_EQ(h.Download(), eager_h);
  EXPECT_EQ(dh.Download(), eager_dh);
  EXPECT_EQ(pg_a.Download(), eager_a);
  EXPECT_EQ(pg_b.Download(), eager_b);
  EXPECT_EQ(b->Loss(m), eager_loss);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A real stage refuses what the contract rules out, before touching a byte.
TEST_P(CudaMlpDeviceTest, CallsCheckTheirContextMicrobatchAndBuffers) {
  const MlpLayout layout{2, 1, 2, 1};
  const CudaMlpOptions options = Options(dtype(), kDeviceShape, 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaMlpStage> first,
                       CudaMlpStage::Create(options, layout, 0, 0, nullptr));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaMlpStage> last,
                       CudaMlpStage::Create(options, layout, 1, 0, nullptr));
  EXPECT_EQ(first->device(), 0);
  EXPECT_EQ(first->Sizes().input_bytes, kDeviceShape.activation_floats() * element_bytes());
  const size_t activation = static_cast<size_t>(first->Sizes().input_bytes);
  DeviceBuffer x(activation), y(activation), stash(static_cast<size_t>(first->Sizes().stash_bytes));
  const absl::Status host = first->Forward(ExecutionContext{}, 0, x.bytes(), y.bytes(), stash.bytes());
  EXPECT_EQ(host.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(host),
            "cuda mlp stage 0 computes on CUDA device 0; this rank's buffers are in host memory");
  EXPECT_EQ(first->FinishStep(ExecutionContext{}, {}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(first->LoadInput(context(), 2, x.bytes())),
            "cuda mlp stage 0: microbatch 2 is outside 0..1");
  EXPECT_EQ(Message(first->Forward(context(), 0, x.bytes().subspan(2), y.bytes(), stash.bytes())),
            absl::StrCat("cuda mlp stage 0: the input buffer has ", activation - 2,
                         " bytes; expected ", activation));
  EXPECT_EQ(Message(last->LoadInput(context(), 0, x.bytes())),
            "cuda mlp stage 1 is not its chain's first stage: it holds no inputs");
  EXPECT_EQ(last->Loss(0), 0.0);
  EXPECT_EQ(first->Loss(0), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMlpDeviceTest,
                         ::testing::Values(Dtype::kFp32, Dtype::kBf16),
                         [](const ::testing::TestParamInfo<Dtype>& param) {
                           return std::string(DtypeName(param.param));
                         });

}  // namespace
}  // namespace jitpipe::cuda_mlp_stage_test
