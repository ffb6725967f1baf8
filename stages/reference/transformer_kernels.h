// The elementwise and row-wise kernels of the reference transformer decoder
// (transformer_layer.h composes them with the GEMMs of blas_gemm.h and the
// attention of attention_kernels.h): fp32 RMSNorm, rotary positions, SwiGLU,
// token embedding and cross entropy, each forward and backward.
//
// Tensors are row-major [rows x width] with rows = microbatch_size x seq
// tokens (sequence-major within a sample: row r is position r mod seq).
// Backward kernels that may work in place say so. All functions are pure
// apart from their outputs and thread-safe; pointers are borrowed for the
// call. REQUIRES everywhere: the buffers hold the sizes the comments state.
#ifndef JITPIPE_STAGES_REFERENCE_TRANSFORMER_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_TRANSFORMER_KERNELS_H_

#include <cstdint>

namespace jitpipe {

// The block's shape, planning/transformer.h's symbols: h hidden, a heads,
// g kv_heads, d = h / a, f ffn, s seq, b batch (microbatch size), V vocab.
struct TransformerBlockShape {
  int64_t hidden = 8;    // h
  int64_t heads = 2;     // a
  int64_t kv_heads = 1;  // g; a multiple of it is a
  int64_t ffn = 12;      // f (SwiGLU's width)
  int64_t seq = 4;       // s
  int64_t batch = 1;     // b
  int64_t vocab = 11;    // V

  int64_t head_dim() const { return hidden / heads; }
  int64_t rows() const { return seq * batch; }
  // A row of the fused QKV projection: q (a heads), then k and v (g heads).
  int64_t qkv_width() const { return hidden + 2 * kv_heads * head_dim(); }
};

inline constexpr float kRmsNormEpsilon = 1e-5f;
inline constexpr float kRotaryBase = 10000.0f;

// y = x / rms(x) * w per row, rms(x) = sqrt(mean(x²) + eps); rstd[r] =
// 1 / rms(row r). x, y [rows x width]; w [width]; rstd [rows].
void RmsNormForward(const float* x, const float* w, int64_t rows, int64_t width, float* y,
                    float* rstd);

// From dy, the input x and rstd: dx = d loss / d x (+ residual_grad when not
// null), and dw += d loss / d w summed over the rows. dx may be x itself or
// residual_grad itself (each row is read before it is written).
void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                     const float* residual_grad, int64_t rows, int64_t width, float* dx,
                     float* dw);

// Rotates, in place, the q and k heads of every row of a fused QKV tensor
// [rows x qkv_width] by its position (GPT-NeoX's half-split pairs (i, i + d/2),
// angle pos x base^(-2i/d)); `inverse` rotates back, which is also the
// backward of the rotation (a rotation's transpose is its inverse).
// REQUIRES: head_dim even.
void RotaryInPlace(const TransformerBlockShape& shape, float* qkv, bool inverse);

// act = silu(gate) * up elementwise, silu(x) = x sigmoid(x); n elements.
void SwiGluForward(const float* gate, const float* up, int64_t n, float* act);

// From d act: writes d gate into dgate and d up into dup, which may be gate
// and up themselves.
void SwiGluBackward(const float* gate, const float* up, const float* dact, int64_t n,
                    float* dgate, float* dup);

// y[r] = table[tokens[r]]: tokens [rows] in [0, vocab), table [vocab x width].
void EmbeddingForward(const int64_t* tokens, const float* table, int64_t rows, int64_t width,
                      float* y);

// dtable[tokens[r]] += dy[r] for every row.
void EmbeddingBackwardWeight(const int64_t* tokens, const float* dy, int64_t rows,
                             int64_t width, float* dtable);

// Turns logits [rows x vocab] into their log-softmax in place and returns the
// sum over rows of -log_softmax[r][targets[r]], in double.
double CrossEntropyForward(float* logits, const int64_t* targets, int64_t rows, int64_t vocab);

// Turns a log-softmax [rows x vocab] into d loss / d logits in place, for
// loss = scale x the sum CrossEntropyForward returned: scale (softmax -
// onehot(target)).
void CrossEntropyBackward(float* log_softmax, const int64_t* targets, int64_t rows,
                          int64_t vocab, float scale);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_TRANSFORMER_KERNELS_H_
