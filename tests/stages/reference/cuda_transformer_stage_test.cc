// The CUDA transformer stage: host cases (its sizes are the planner's bytes
// at --dtype bf16, its refusals, the row-major product mapping) always; the
// device cases (every call against the CPU block, I then W against B, a whole
// unpipelined step against the reference trainer) skip without a device.
#include "stages/reference/cuda_transformer_stage.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planning/transformer.h"
#include "stages/reference/cuda_mlp_stage.h"
#include "stages/reference/cuda_row_gemm.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/transformer_reference.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::cuda_transformer_stage_test {
namespace {

TransformerBlockShape TinyShape() {
  TransformerBlockShape s;
  s.hidden = 16;
  s.heads = 4;
  s.kv_heads = 2;
  s.ffn = 24;
  s.seq = 6;
  s.batch = 2;
  s.vocab = 23;
  return s;
}

TransformerOptions Options(int layers, int stages, TransformerBlockShape shape = TinyShape()) {
  TransformerOptions o;
  o.shape = shape;
  o.seed = 5;
  absl::StatusOr<std::vector<TransformerStageParts>> parts = EvenTransformerParts(layers, stages);
  EXPECT_TRUE(parts.ok()) << parts.status();
  if (parts.ok()) o.parts = *parts;
  return o;
}

// The planner's model of the same block at bf16 (SwiGLU, RMSNorm, fused
// attention, fp32 cross entropy).
LayeredModel PlannedBf16(const TransformerBlockShape& s, int layers) {
  TransformerShape x;
  x.layers = layers;
  x.hidden = s.hidden;
  x.heads = static_cast<int>(s.heads);
  x.kv_heads = static_cast<int>(s.kv_heads);
  x.ffn = s.ffn;
  x.vocab = s.vocab;
  x.seq = s.seq;
  x.microbatch_size = s.batch;
  x.swiglu = true;
  x.rmsnorm = true;
  x.attention = AttentionImpl::kFused;
  x.dtype = Dtype::kBf16;
  x.loss_dtype = Dtype::kFp32;
  x.tflops = 1;
  absl::StatusOr<LayeredModel> model = BuildTransformerModel(x);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : LayeredModel();
}

TEST(CudaTransformerSizesTest, AreThePlannersBytesAtBf16) {
  for (int stages : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    const TransformerOptions o = Options(4, stages);
    const LayeredModel model = PlannedBf16(o.shape, 4);
    int layer = 0;  // the model's index: 0 embedding, 1..4 layers, 5 loss
    for (int p = 0; p < stages; ++p) {
      const TransformerStageParts& part = o.parts[p];
      const int begin = part.embedding ? 0 : part.first_layer + 1;
      const int end = part.first_layer + 1 + part.layers + (part.loss ? 1 : 0);
      int64_t stash = 0;
      std::vector<int64_t> segments;  // the planner's: each layer's non-empty stash
      for (int i = begin; i < end; ++i) {
        stash += model.layers[i].stash_bytes;
        if (model.layers[i].stash_bytes > 0) segments.push_back(model.layers[i].stash_bytes);
      }
      if (segments.size() < 2) segments.clear();
      const StageSizes sizes = CudaTransformerSizes(o, p);
      EXPECT_EQ(sizes.stash_bytes, stash) << "part " << p;
      EXPECT_EQ(sizes.stash_segments, segments) << "part " << p;
      EXPECT_EQ(sizes.output_bytes, model.layers[end - 1].output_bytes) << "part " << p;
      EXPECT_EQ(sizes.input_bytes,
                begin == 0 ? model.input_bytes : model.layers[begin - 1].output_bytes);
      // Gradients stay fp32 (main_grad): twice the bf16 parameter bytes.
      int64_t params = 0;
      for (int i = begin; i < end; ++i) params += model.layers[i].param_bytes;
      EXPECT_EQ(sizes.param_grad_bytes, 2 * params) << "part " << p;
      layer = end;
    }
    EXPECT_EQ(layer, 6);
  }
}

TEST(CudaTransformerOptionsTest, RefusesWhatTheDeviceLayoutCannotHold) {
  TransformerBlockShape odd = TinyShape();
  odd.ffn = 5;
  odd.seq = 3;
  odd.batch = 1;  // rows x ffn = 15: an fp32 term after the bf16 ones would be misaligned
  const absl::Status s = ValidateCudaTransformerOptions(Options(2, 2, odd));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("must be even"), std::string::npos) << s;
  TransformerOptions no_head = Options(2, 2);
  no_head.parts.back().loss = false;
  EXPECT_EQ(ValidateCudaTransformerOptions(no_head).code(), absl::StatusCode::kInvalidArgument);
  TransformerBlockShape uneven = TinyShape();
  uneven.heads = 3;
  EXPECT_EQ(ValidateCudaTransformerOptions(Options(2, 2, uneven)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_OK(ValidateCudaTransformerOptions(Options(2, 2)));
}

TEST(CudaTransformerFactoryTest, RefusesAStageOutsideTheLayout) {
  CudaTransformerStageFactory factory(Options(2, 2), MlpLayout{2, 1, 2, 1});
  EXPECT_EQ(factory.Make(2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factory.Make(0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(factory.FinishedGrads(0, 0).empty());
}

// Row-major y = x w as cuBLAS's column-major call, computed on the host by
// the call's own definition (column-major, op, leading dimensions), against
// the row-major product; each of the three dense products, and transposes.
void ColumnMajorCall(const reference_cuda::ColumnGemm& c, const std::vector<float>& a,
                     const std::vector<float>& b, std::vector<float>& out) {
  for (int64_t j = 0; j < c.n; ++j) {
    for (int64_t i = 0; i < c.m; ++i) {
      double sum = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        const float av = c.transpose_a ? a[i * c.lda + l] : a[l * c.lda + i];
        const float bv = c.transpose_b ? b[l * c.ldb + j] : b[j * c.ldb + l];
        sum += static_cast<double>(av) * bv;
      }
      out[j * c.ldc + i] = static_cast<float>(c.alpha * sum + c.beta * out[j * c.ldc + i]);
    }
  }
}

TEST(CudaRowGemmTest, TheColumnMajorCallIsTheRowMajorProduct) {
  const int64_t m = 3, k = 4, n = 5;
  std::vector<float> x(m * k), w(k * n), dy(m * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) - 2;
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i % 3) - 1;
  auto row = [](const std::vector<float>& a, const std::vector<float>& b, int64_t r, int64_t in,
                int64_t c, bool ta, bool tb) {  // op(a)[r x in] op(b)[in x c], row-major
    std::vector<float> out(r * c, 0);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t l = 0; l < in; ++l)
          out[i * c + j] += (ta ? a[l * r + i] : a[i * in + l]) * (tb ? b[j * in + l] : b[l * c + j]);
    return out;
  };
  std::vector<float> y(m * n, 0), dx(m * k, 0), dw(k * n, 0);
  ColumnMajorCall(ToColumnMajor(reference_cuda::DenseForward(m, k, n, 0)), w, x, y);
  EXPECT_EQ(y, row(x, w, m, k, n, false, false));
  ColumnMajorCall(ToColumnMajor(reference_cuda::DenseInputGrad(m, n, k, 0)), w, dy, dx);
  EXPECT_EQ(dx, row(dy, w, m, n, k, false, true));
  ColumnMajorCall(ToColumnMajor(reference_cuda::DenseWeightGrad(m, k, n)), dy, x, dw);
  EXPECT_EQ(dw, row(x, dy, k, m, n, true, false));
}

// ---- Device cases ----------------------------------------------------------

class CudaTransformerDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA device (" << (e != cudaSuccess ? cudaGetErrorString(e) : "none")
                   << "): this case runs on a GPU";
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  ExecutionContext context() const { return {MemorySpace::kDevice, 0, stream_}; }
  cudaStream_t stream_ = nullptr;
};

struct Buffer {
  explicit Buffer(int64_t bytes) : size(static_cast<size_t>(bytes)) {
    if (size > 0) {
      EXPECT_EQ(cudaMalloc(&data, size), cudaSuccess);
    }
    if (data != nullptr) {
      EXPECT_EQ(cudaMemset(data, 0, size), cudaSuccess);
    }
  }
  ~Buffer() { cudaFree(data); }
  MutableBytes bytes() { return {static_cast<std::byte*>(data), data == nullptr ? 0 : size}; }
  std::vector<std::byte> Download() const {
    std::vector<std::byte> out(size);
    if (size > 0) {
      EXPECT_EQ(cudaMemcpy(out.data(), data, size, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }
  void* data = nullptr;
  size_t size = 0;
};

ConstBytes AsBytes(const std::vector<std::byte>& v) { return ConstBytes(v.data(), v.size()); }

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return got.size() != want.size() ? INFINITY : diff / std::max(scale, 1e-30);
}

// A chain of stages run one call at a time on one stream (every microbatch
// forward, then backward; `split` runs I then W, else B), the step's loss.
double RunStep(const TransformerOptions& o, const MlpLayout& layout, StageFactory& factory,
               const ExecutionContext& ctx, bool split) {
  std::vector<std::unique_ptr<Stage>> stages;
  for (int st = 0; st < layout.num_stages(); ++st) {
    absl::StatusOr<std::unique_ptr<Stage>> made = factory.Make(st, 0);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return NAN;
    stages.push_back(*std::move(made));
  }
  const int mbs = layout.microbatches_per_chain(), n = layout.num_stages();
  std::vector<std::unique_ptr<Buffer>> in, stash, grad_in, params;
  for (int st = 0; st < n; ++st) {
    const StageSizes z = stages[st]->Sizes();
    params.push_back(std::make_unique<Buffer>(z.param_grad_bytes));
    for (int m = 0; m < mbs; ++m) {
      in.push_back(std::make_unique<Buffer>(z.input_bytes));
      stash.push_back(std::make_unique<Buffer>(z.stash_bytes));
      grad_in.push_back(std::make_unique<Buffer>(st == 0 ? 0 : z.input_bytes));
    }
  }
  Buffer loss_out(4);
  auto at = [mbs](int st, int m) { return st * mbs + m; };
  for (int m = 0; m < mbs; ++m) {
    EXPECT_OK(stages[0]->LoadInput(ctx, m, in[at(0, m)]->bytes()));
    for (int st = 0; st < n; ++st) {
      MutableBytes out = st + 1 < n ? in[at(st + 1, m)]->bytes() : loss_out.bytes();
      EXPECT_OK(stages[st]->Forward(ctx, m, in[at(st, m)]->bytes(), out, stash[at(st, m)]->bytes()));
    }
  }
  for (int m = 0; m < mbs; ++m) {
    for (int st = n - 1; st >= 0; --st) {
      MutableBytes grad_out = st + 1 < n ? grad_in[at(st + 1, m)]->bytes() : MutableBytes();
      if (split) {
        EXPECT_OK(stages[st]->BackwardInput(ctx, m, grad_out, stash[at(st, m)]->bytes(),
                                            grad_in[at(st, m)]->bytes()));
        EXPECT_OK(stages[st]->BackwardWeight(ctx, m, in[at(st, m)]->bytes(), grad_out,
                                             stash[at(st, m)]->bytes(), params[st]->bytes()));
      } else {
        EXPECT_OK(stages[st]->Backward(ctx, m, in[at(st, m)]->bytes(), grad_out,
                                       stash[at(st, m)]->bytes(), grad_in[at(st, m)]->bytes(),
                                       params[st]->bytes()));
      }
    }
  }
  for (int st = 0; st < n; ++st) EXPECT_OK(stages[st]->FinishStep(ctx, params[st]->bytes()));
  EXPECT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)), cudaSuccess);
  double loss = 0;
  for (int m = 0; m < mbs; ++m) loss += stages[n - 1]->Loss(m);
  (void)o;
  return loss;
}

// A whole unpipelined step (3 stages: embedding + layer | layer | layer +
// head, 3 microbatches) against the fp32 reference trainer, within the bf16
// bounds of cuda_transformer_stage.h.
TEST_F(CudaTransformerDeviceTest, AStepMatchesTheReferenceTrainerWithinBf16Bounds) {
  const TransformerOptions o = Options(3, 3);
  const MlpLayout layout{3, 1, 3, 1};
  CudaTransformerStageFactory factory(o, layout);
  const double loss = RunStep(o, layout, factory, context(), /*split=*/true);
  const MlpReference reference = RunTransformerReference(o, layout);
  ASSERT_OK_AND_ASSIGN(MlpComparison c,
                       CompareWithReference(reference, loss, layout,
                                            [&](int stage, int replica) {
                                              return factory.FinishedGrads(stage, replica);
                                            },
                                            ReduceKind::kAllReduce));
  std::cout << "[ measured ] bf16 transformer: " << c.ToString() << "\n";
  EXPECT_LE(c.loss_error, kCudaTransformerBf16LossTolerance) << c.ToString();
  EXPECT_LE(c.worst_grad_error, kCudaTransformerBf16Tolerance) << c.ToString();
}

// I then W gives bit for bit what B gives (the same kernels in the same
// order on one stream).
TEST_F(CudaTransformerDeviceTest, SplitBackwardEqualsFullBackward) {
  const TransformerOptions o = Options(2, 2);
  const MlpLayout layout{2, 1, 2, 1};
  CudaTransformerStageFactory split(o, layout), full(o, layout);
  const double a = RunStep(o, layout, split, context(), true);
  const double b = RunStep(o, layout, full, context(), false);
  EXPECT_EQ(a, b);
  for (int st = 0; st < 2; ++st) EXPECT_EQ(split.FinishedGrads(st, 0), full.FinishedGrads(st, 0));
}

// Every call of the middle stage of three against the CPU stage, from the
// same (bf16-rounded) input: Forward's output, BackwardInput's input
// gradient, BackwardWeight's parameter gradients.
TEST_F(CudaTransformerDeviceTest, EveryCallMatchesTheCpuBlock) {
  const TransformerOptions o = Options(3, 3);
  const MlpLayout layout{3, 1, 2, 1};
  const TransformerBlockShape& s = o.shape;
  const int64_t hidden_floats = s.rows() * s.hidden;
  TransformerStage cpu(o, layout, 1, 0, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaTransformerStage> gpu,
                       CudaTransformerStage::Create(o, layout, 1, 0, nullptr));
  std::vector<float> x(hidden_floats), dy(hidden_floats);
  for (int64_t i = 0; i < hidden_floats; ++i) {
    x[i] = std::sin(0.37f * static_cast<float>(i));
    dy[i] = 1e-2f * std::cos(0.11f * static_cast<float>(i));
  }
  // Both read the same values: the bf16 rounding of x and dy.
  x = DecodeFloats(AsBytes(EncodeFloats(x, Dtype::kBf16)), Dtype::kBf16);
  dy = DecodeFloats(AsBytes(EncodeFloats(dy, Dtype::kBf16)), Dtype::kBf16);
  const StageSizes cs = cpu.Sizes(), gs = gpu->Sizes();
  std::vector<float> y(hidden_floats), stash(cs.stash_bytes / 4), dx(hidden_floats),
      grads(cs.param_grad_bytes / 4, 0.0f);
  const ExecutionContext host;
  auto bytes = [](std::vector<float>& v) {
    return MutableBytes(reinterpret_cast<std::byte*>(v.data()), v.size() * 4);
  };
  ASSERT_OK(cpu.Forward(host, 0, bytes(x), bytes(y), bytes(stash)));
  ASSERT_OK(cpu.BackwardInput(host, 0, bytes(dy), bytes(stash), bytes(dx)));
  ASSERT_OK(cpu.BackwardWeight(host, 0, bytes(x), bytes(dy), bytes(stash), bytes(grads)));

  Buffer gx(gs.input_bytes), gy(gs.output_bytes), gstash(gs.stash_bytes), gdy(gs.output_bytes),
      gdx(gs.input_bytes), ggrads(gs.param_grad_bytes);
  const std::vector<std::byte> xb = EncodeFloats(x, Dtype::kBf16), dyb = EncodeFloats(dy, Dtype::kBf16);
  ASSERT_EQ(cudaMemcpy(gx.data, xb.data(), xb.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(gdy.data, dyb.data(), dyb.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const ExecutionContext ctx = context();
  ASSERT_OK(gpu->Forward(ctx, 0, gx.bytes(), gy.bytes(), gstash.bytes()));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const std::vector<std::byte> yb = gy.Download();
  const double forward = RelativeError(DecodeFloats(AsBytes(yb), Dtype::kBf16), y);
  ASSERT_OK(gpu->BackwardInput(ctx, 0, gdy.bytes(), gstash.bytes(), gdx.bytes()));
  ASSERT_OK(gpu->BackwardWeight(ctx, 0, gx.bytes(), gdy.bytes(), gstash.bytes(), ggrads.bytes()));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const std::vector<std::byte> dxb = gdx.Download(), gb = ggrads.Download();
  const double input_grad = RelativeError(DecodeFloats(AsBytes(dxb), Dtype::kBf16), dx);
  const double weight_grad = RelativeError(DecodeFloats(AsBytes(gb), Dtype::kFp32), grads);
  std::cout << "[ measured ] forward " << forward << ", input grad " << input_grad
            << ", weight grads " << weight_grad << "\n";
  EXPECT_LE(forward, kCudaTransformerBf16Tolerance);
  EXPECT_LE(input_grad, kCudaTransformerBf16Tolerance);
  EXPECT_LE(weight_grad, kCudaTransformerBf16Tolerance);
}

TEST_F(CudaTransformerDeviceTest, RefusesAHostContextAndWrongBuffers) {
  const TransformerOptions o = Options(2, 2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaTransformerStage> gpu,
                       CudaTransformerStage::Create(o, MlpLayout{2, 1, 2, 1}, 1, 0, nullptr));
  Buffer in(gpu->Sizes().input_bytes), stash(gpu->Sizes().stash_bytes), wrong(6);
  EXPECT_EQ(gpu->Forward(ExecutionContext{}, 0, in.bytes(), {}, stash.bytes()).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status s = gpu->Forward(context(), 0, wrong.bytes(), {}, stash.bytes());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cuda transformer stage 1: the input buffer"), std::string::npos) << s;
  EXPECT_EQ(gpu->Forward(context(), 2, in.bytes(), {}, stash.bytes()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->LoadInput(context(), 0, in.bytes()).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace jitpipe::cuda_transformer_stage_test
