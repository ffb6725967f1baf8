#include "stages/reference/cuda_transformer_layer.h"

#include <array>
#include <cmath>
#include <string>

#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"
#include "stages/reference/cublas_error.h"
#include "stages/reference/cuda_attention_kernels.h"
#include "stages/reference/cuda_loss_kernels.h"
#include "stages/reference/cuda_row_gemm.h"
#include "stages/reference/cuda_transformer_kernels.h"

namespace jitpipe::reference_cuda {
namespace {

// transformer_layer.cc's slots and parameters, in their order.
enum Slot { kX, kRstd1, kN1, kQkv, kLse, kO, kMid, kRstd2, kN2, kGate, kUp, kAct, kSlots };
enum Param { kW1, kWqkv, kWo, kW2, kWg, kWu, kWd, kParams };
enum HeadSlot { kHeadX, kHeadRstd, kHeadN, kHeadLogits, kHeadSlots };

template <size_t N, typename T>
std::array<T*, N> SlotsOf(const std::vector<StashTerm>& terms, T* base) {
  std::array<T*, N> out{};
  int64_t at = 0;
  for (size_t i = 0; i < N; ++i) {
    out[i] = base + at;
    at += StashTermBf16Bytes(terms[i]);
  }
  return out;
}

template <typename T>
std::array<T*, kParams> ParamsOf(const TransformerBlockShape& s, T* base) {
  const int64_t h = s.hidden, f = s.ffn;
  const std::array<int64_t, kParams> sizes = {h, h * s.qkv_width(), h * h, h, h * f, h * f, f * h};
  std::array<T*, kParams> out{};
  int64_t at = 0;
  for (int i = 0; i < kParams; ++i) {
    out[i] = base + at;
    at += sizes[i];
  }
  return out;
}

template <typename T>
T* As(std::byte* p) { return reinterpret_cast<T*>(p); }
template <typename T>
const T* As(const std::byte* p) { return reinterpret_cast<const T*>(p); }

// One product of cuda_row_gemm.h: a and b (the row-major operands) in bf16,
// fp32 accumulation, c in `c_type`.
absl::Status Gemm(const CudaLayerContext& ctx, const RowGemm& g, const void* a, const void* b,
                  void* c, cudaDataType c_type) {
  const ColumnGemm x = ToColumnMajor(g);
  CUBLAS_CALL(cublasGemmStridedBatchedEx(
      ctx.blas, x.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, x.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(x.m), static_cast<int>(x.n), static_cast<int>(x.k), &x.alpha, b,
      CUDA_R_16BF, static_cast<int>(x.lda), x.stride_a, a, CUDA_R_16BF, static_cast<int>(x.ldb),
      x.stride_b, &x.beta, c, c_type, static_cast<int>(x.ldc), x.stride_c,
      static_cast<int>(x.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status Copy(const CudaLayerContext& ctx, void* to, const void* from, int64_t bytes) {
  if (to == from) return absl::OkStatus();
  CUDA_CALL(cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                            ctx.stream));
  return absl::OkStatus();
}

// Where one sample's K/V head group lives: query head q0 = kv x group.
struct Group {
  const TransformerBlockShape& s;
  int64_t b, kv;
  int64_t d() const { return s.head_dim(); }
  int64_t size() const { return s.heads / s.kv_heads; }
  int64_t q0() const { return kv * size(); }
  int64_t row0() const { return b * s.seq; }
  int64_t Q() const { return row0() * s.qkv_width() + q0() * d(); }
  int64_t K() const { return row0() * s.qkv_width() + s.hidden + kv * d(); }
  int64_t V() const { return K() + s.kv_heads * d(); }
  int64_t O() const { return row0() * s.hidden + q0() * d(); }
  int64_t Lse() const { return (b * s.heads + q0()) * s.seq; }
};

// scores [group x s x s] = scale Q_t K^T for every query head t of the group.
RowGemm ScoresGemm(const TransformerBlockShape& s) {
  RowGemm g;
  g.transpose_b = true;
  g.m = s.seq, g.n = s.seq, g.k = s.head_dim();
  g.lda = s.qkv_width(), g.ldb = s.qkv_width(), g.ldc = s.seq;
  g.stride_a = s.head_dim(), g.stride_b = 0, g.stride_c = s.seq * s.seq;
  g.batch = s.heads / s.kv_heads;
  g.alpha = 1.0f / std::sqrt(static_cast<float>(s.head_dim()));
  return g;
}

absl::Status AttentionForward(const CudaLayerContext& ctx, const Bf16* qkv, Bf16* out,
                              float* lse) {
  const TransformerBlockShape& s = *ctx.shape;
  const CudaLayerWorkspace& ws = *ctx.ws;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t kv = 0; kv < s.kv_heads; ++kv) {
      const Group grp{s, b, kv};
      RETURN_IF_ERROR(Gemm(ctx, ScoresGemm(s), qkv + grp.Q(), qkv + grp.K(), ws.scores, CUDA_R_32F));
      CUDA_CALL(LaunchCausalSoftmax(ws.scores, grp.size(), s.seq, lse + grp.Lse(), ws.probs,
                                    ctx.stream));
      RowGemm pv;  // O_t [s x d] = P_t V
      pv.m = s.seq, pv.n = grp.d(), pv.k = s.seq;
      pv.lda = s.seq, pv.ldb = s.qkv_width(), pv.ldc = s.hidden;
      pv.stride_a = s.seq * s.seq, pv.stride_b = 0, pv.stride_c = grp.d();
      pv.batch = grp.size();
      RETURN_IF_ERROR(Gemm(ctx, pv, ws.probs, qkv + grp.V(), out + grp.O(), CUDA_R_16BF));
    }
  }
  return absl::OkStatus();
}

// dqkv (fp32, ws.qkv) from dO (ws.hidden_b) and the forward's qkv, O, lse.
absl::Status AttentionBackward(const CudaLayerContext& ctx, const Bf16* qkv, const Bf16* out,
                               const float* lse) {
  const TransformerBlockShape& s = *ctx.shape;
  const CudaLayerWorkspace& ws = *ctx.ws;
  const int64_t w = s.qkv_width(), d = s.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  CUDA_CALL(cudaMemsetAsync(ws.qkv, 0, static_cast<size_t>(s.rows() * w) * sizeof(float),
                            ctx.stream));
  CUDA_CALL(LaunchAttentionDelta(out, ws.hidden_b, s.batch, s.heads, s.seq, d, ws.delta,
                                 ctx.stream));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t kv = 0; kv < s.kv_heads; ++kv) {
      const Group grp{s, b, kv};
      const int64_t n = grp.size(), sq = s.seq * s.seq;
      RETURN_IF_ERROR(Gemm(ctx, ScoresGemm(s), qkv + grp.Q(), qkv + grp.K(), ws.scores, CUDA_R_32F));
      CUDA_CALL(LaunchCausalProbabilities(ws.scores, lse + grp.Lse(), n, s.seq, ws.probs,
                                          ctx.stream));
      for (int64_t t = 0; t < n; ++t) {  // dV += P_t^T dO_t
        RowGemm dv;
        dv.transpose_a = true;
        dv.m = s.seq, dv.n = d, dv.k = s.seq;
        dv.lda = s.seq, dv.ldb = s.hidden, dv.ldc = w, dv.beta = 1.0f;
        RETURN_IF_ERROR(Gemm(ctx, dv, ws.probs + t * sq, ws.hidden_b + grp.O() + t * d,
                             ws.qkv + grp.V(), CUDA_R_32F));
      }
      RowGemm dp;  // dP_t = dO_t V^T
      dp.transpose_b = true;
      dp.m = s.seq, dp.n = s.seq, dp.k = d;
      dp.lda = s.hidden, dp.ldb = w, dp.ldc = s.seq;
      dp.stride_a = d, dp.stride_b = 0, dp.stride_c = sq, dp.batch = n;
      RETURN_IF_ERROR(Gemm(ctx, dp, ws.hidden_b + grp.O(), qkv + grp.V(), ws.dprobs, CUDA_R_32F));
      CUDA_CALL(LaunchScoresGrad(ws.scores, ws.dprobs, ws.delta + grp.Lse(), n, s.seq, scale,
                                 ws.probs, ctx.stream));
      RowGemm dq;  // dQ_t = dS_t K
      dq.m = s.seq, dq.n = d, dq.k = s.seq;
      dq.lda = s.seq, dq.ldb = w, dq.ldc = w;
      dq.stride_a = sq, dq.stride_b = 0, dq.stride_c = d, dq.batch = n;
      RETURN_IF_ERROR(Gemm(ctx, dq, ws.probs, qkv + grp.K(), ws.qkv + grp.Q(), CUDA_R_32F));
      for (int64_t t = 0; t < n; ++t) {  // dK += dS_t^T Q_t
        RowGemm dk;
        dk.transpose_a = true;
        dk.m = s.seq, dk.n = d, dk.k = s.seq;
        dk.lda = s.seq, dk.ldb = w, dk.ldc = w, dk.beta = 1.0f;
        RETURN_IF_ERROR(Gemm(ctx, dk, ws.probs + t * sq, qkv + grp.Q() + t * d, ws.qkv + grp.K(),
                             CUDA_R_32F));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t StashTermBf16Bytes(const StashTerm& term) {
  return term.floats * (term.name.find("fp32") != std::string::npos ? 4 : 2);
}

int64_t CudaDecoderLayerStashBytes(const TransformerBlockShape& s) {
  int64_t bytes = 0;
  for (const StashTerm& t : DecoderLayerStashTerms(s)) bytes += StashTermBf16Bytes(t);
  return bytes;
}

int64_t CudaLossHeadStashBytes(const TransformerBlockShape& s) {
  int64_t bytes = 0;
  for (const StashTerm& t : LossHeadStashTerms(s)) bytes += StashTermBf16Bytes(t);
  return bytes;
}

std::vector<int64_t> CudaLayerWorkspaceElements(const TransformerBlockShape& s, bool loss_head) {
  const int64_t r = s.rows(), group = s.heads / s.kv_heads, sq = s.seq * s.seq;
  return {r * s.ffn,     r * s.hidden,     r * s.qkv_width(), r * s.hidden,
          group * sq,    group * sq,       group * sq,        s.batch * s.heads * s.seq,
          loss_head ? r * s.vocab : 0,     loss_head ? r : 0};
}

absl::Status CudaDecoderForward(const CudaLayerContext& ctx, const Bf16* params, const Bf16* x,
                                std::byte* stash, Bf16* y) {
  const TransformerBlockShape& s = *ctx.shape;
  const CudaLayerWorkspace& ws = *ctx.ws;
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn, w = s.qkv_width();
  const auto p = ParamsOf(s, params);
  const auto t = SlotsOf<kSlots>(DecoderLayerStashTerms(s), stash);
  Bf16* xs = As<Bf16>(t[kX]);
  RETURN_IF_ERROR(Copy(ctx, xs, x, r * h * 2));
  CUDA_CALL(LaunchRmsNormForward(xs, p[kW1], r, h, As<Bf16>(t[kN1]), As<float>(t[kRstd1]),
                                 ctx.stream));
  RETURN_IF_ERROR(Gemm(ctx, DenseForward(r, h, w, 0), t[kN1], p[kWqkv], ws.qkv, CUDA_R_32F));
  CUDA_CALL(LaunchRotary(ws.qkv, As<Bf16>(t[kQkv]), r, s.seq, w, s.heads + s.kv_heads,
                         s.head_dim(), /*inverse=*/false, ctx.stream));
  RETURN_IF_ERROR(AttentionForward(ctx, As<Bf16>(t[kQkv]), As<Bf16>(t[kO]), As<float>(t[kLse])));
  RETURN_IF_ERROR(Copy(ctx, t[kMid], xs, r * h * 2));
  RETURN_IF_ERROR(Gemm(ctx, DenseForward(r, h, h, 1), t[kO], p[kWo], t[kMid], CUDA_R_16BF));
  CUDA_CALL(LaunchRmsNormForward(As<Bf16>(t[kMid]), p[kW2], r, h, As<Bf16>(t[kN2]),
                                 As<float>(t[kRstd2]), ctx.stream));
  RETURN_IF_ERROR(Gemm(ctx, DenseForward(r, h, f, 0), t[kN2], p[kWg], t[kGate], CUDA_R_16BF));
  RETURN_IF_ERROR(Gemm(ctx, DenseForward(r, h, f, 0), t[kN2], p[kWu], t[kUp], CUDA_R_16BF));
  CUDA_CALL(LaunchSwiGluForward(As<Bf16>(t[kGate]), As<Bf16>(t[kUp]), r * f, As<Bf16>(t[kAct]),
                                ctx.stream));
  RETURN_IF_ERROR(Copy(ctx, y, t[kMid], r * h * 2));
  return Gemm(ctx, DenseForward(r, f, h, 1), t[kAct], p[kWd], y, CUDA_R_16BF);
}

absl::Status CudaDecoderBackwardInput(const CudaLayerContext& ctx, const Bf16* params,
                                      const Bf16* dy, std::byte* stash, float* norm_grads) {
  const TransformerBlockShape& s = *ctx.shape;
  const CudaLayerWorkspace& ws = *ctx.ws;
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn, w = s.qkv_width();
  const auto p = ParamsOf(s, params);
  const auto t = SlotsOf<kSlots>(DecoderLayerStashTerms(s), stash);
  RETURN_IF_ERROR(Gemm(ctx, DenseInputGrad(r, h, f, 0), dy, p[kWd], ws.ffn, CUDA_R_32F));
  CUDA_CALL(LaunchSwiGluBackward(ws.ffn, r * f, As<Bf16>(t[kGate]), As<Bf16>(t[kUp]),
                                 ctx.stream));
  RETURN_IF_ERROR(Gemm(ctx, DenseInputGrad(r, f, h, 0), t[kGate], p[kWg], ws.hidden, CUDA_R_32F));
  RETURN_IF_ERROR(Gemm(ctx, DenseInputGrad(r, f, h, 1), t[kUp], p[kWu], ws.hidden, CUDA_R_32F));
  Bf16* mid = As<Bf16>(t[kMid]);
  CUDA_CALL(LaunchRmsNormBackwardWeight(mid, As<float>(t[kRstd2]), ws.hidden, r, h,
                                        norm_grads + h, ctx.stream));
  CUDA_CALL(LaunchRmsNormBackwardInput(mid, p[kW2], As<float>(t[kRstd2]), ws.hidden, dy, r, h,
                                       mid, ctx.stream));  // d mid
  RETURN_IF_ERROR(Gemm(ctx, DenseInputGrad(r, h, h, 0), mid, p[kWo], ws.hidden_b, CUDA_R_16BF));
  RETURN_IF_ERROR(AttentionBackward(ctx, As<Bf16>(t[kQkv]), As<Bf16>(t[kO]), As<float>(t[kLse])));
  CUDA_CALL(LaunchRotary(ws.qkv, As<Bf16>(t[kQkv]), r, s.seq, w, s.heads + s.kv_heads,
                         s.head_dim(), /*inverse=*/true, ctx.stream));  // d qkv
  RETURN_IF_ERROR(Gemm(ctx, DenseInputGrad(r, w, h, 0), t[kQkv], p[kWqkv], ws.hidden, CUDA_R_32F));
  Bf16* x = As<Bf16>(t[kX]);
  CUDA_CALL(LaunchRmsNormBackwardWeight(x, As<float>(t[kRstd1]), ws.hidden, r, h, norm_grads,
                                        ctx.stream));
  CUDA_CALL(LaunchRmsNormBackwardInput(x, p[kW1], As<float>(t[kRstd1]), ws.hidden, mid, r, h, x,
                                       ctx.stream));  // dx
  return absl::OkStatus();
}

absl::Status CudaDecoderBackwardWeight(const CudaLayerContext& ctx, const Bf16* dy,
                                       const std::byte* stash, float* grads) {
  const TransformerBlockShape& s = *ctx.shape;
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn;
  const auto g = ParamsOf(s, grads);
  const auto t = SlotsOf<kSlots>(DecoderLayerStashTerms(s), stash);
  RETURN_IF_ERROR(Gemm(ctx, DenseWeightGrad(r, f, h), t[kAct], dy, g[kWd], CUDA_R_32F));
  RETURN_IF_ERROR(Gemm(ctx, DenseWeightGrad(r, h, f), t[kN2], t[kGate], g[kWg], CUDA_R_32F));
  RETURN_IF_ERROR(Gemm(ctx, DenseWeightGrad(r, h, f), t[kN2], t[kUp], g[kWu], CUDA_R_32F));
  RETURN_IF_ERROR(Gemm(ctx, DenseWeightGrad(r, h, h), t[kO], t[kMid], g[kWo], CUDA_R_32F));
  return Gemm(ctx, DenseWeightGrad(r, h, s.qkv_width()), t[kN1], t[kQkv], g[kWqkv], CUDA_R_32F);
}

absl::Status CudaAddDecoderNormGrads(const CudaLayerContext& ctx, const float* norm_grads,
                                     float* grads) {
  const auto g = ParamsOf(*ctx.shape, grads);
  const int64_t h = ctx.shape->hidden;
  CUDA_CALL(LaunchAddInto(norm_grads, h, g[kW1], ctx.stream));
  CUDA_CALL(LaunchAddInto(norm_grads + h, h, g[kW2], ctx.stream));
  return absl::OkStatus();
}

absl::Status CudaLossHeadForward(const CudaLayerContext& ctx, const Bf16* params, const Bf16* x,
                                 const int64_t* targets, double scale, std::byte* stash,
                                 double* loss, float* loss_f32) {
  const TransformerBlockShape& s = *ctx.shape;
  const int64_t r = s.rows(), h = s.hidden;
  const auto t = SlotsOf<kHeadSlots>(LossHeadStashTerms(s), stash);
  RETURN_IF_ERROR(Copy(ctx, t[kHeadX], x, r * h * 2));
  CUDA_CALL(LaunchRmsNormForward(As<Bf16>(t[kHeadX]), params, r, h, As<Bf16>(t[kHeadN]),
                                 As<float>(t[kHeadRstd]), ctx.stream));
  float* logits = As<float>(t[kHeadLogits]);
  RETURN_IF_ERROR(Gemm(ctx, DenseForward(r, h, s.vocab, 0), t[kHeadN], params + h, logits,
                       CUDA_R_32F));
  CUDA_CALL(LaunchCrossEntropyForward(logits, targets, r, s.vocab, ctx.ws->row_loss, ctx.stream));
  CUDA_CALL(LaunchLossSum(ctx.ws->row_loss, r, scale, loss, loss_f32, ctx.stream));
  return absl::OkStatus();
}

absl::Status CudaLossHeadBackwardInput(const CudaLayerContext& ctx, const Bf16* params,
                                       const int64_t* targets, float scale, std::byte* stash,
                                       float* norm_grad) {
  const TransformerBlockShape& s = *ctx.shape;
  const CudaLayerWorkspace& ws = *ctx.ws;
  const int64_t r = s.rows(), h = s.hidden;
  const auto t = SlotsOf<kHeadSlots>(LossHeadStashTerms(s), stash);
  CUDA_CALL(LaunchCrossEntropyBackward(As<float>(t[kHeadLogits]), targets, r, s.vocab, scale,
                                       ws.logits_b, ctx.stream));
  RETURN_IF_ERROR(Gemm(ctx, DenseInputGrad(r, s.vocab, h, 0), ws.logits_b, params + h, ws.hidden,
                       CUDA_R_32F));
  Bf16* x = As<Bf16>(t[kHeadX]);
  const float* rstd = As<float>(t[kHeadRstd]);
  CUDA_CALL(LaunchRmsNormBackwardWeight(x, rstd, ws.hidden, r, h, norm_grad, ctx.stream));
  CUDA_CALL(LaunchRmsNormBackwardInput(x, params, rstd, ws.hidden, nullptr, r, h, x, ctx.stream));
  return absl::OkStatus();
}

absl::Status CudaLossHeadBackwardWeight(const CudaLayerContext& ctx, const std::byte* stash,
                                        float* grads) {
  const TransformerBlockShape& s = *ctx.shape;
  const int64_t r = s.rows(), h = s.hidden;
  const auto t = SlotsOf<kHeadSlots>(LossHeadStashTerms(s), stash);
  // dlogits is fp32 in the stash; the product reads bf16 (both operands one type).
  CUDA_CALL(LaunchToBf16(As<float>(t[kHeadLogits]), r * s.vocab, ctx.ws->logits_b, ctx.stream));
  return Gemm(ctx, DenseWeightGrad(r, h, s.vocab), t[kHeadN], ctx.ws->logits_b, grads + h,
              CUDA_R_32F);
}

}  // namespace jitpipe::reference_cuda
