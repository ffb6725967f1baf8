// The arithmetic of the reference MLP, shared by its pipeline stage
// (mlp_stage.h) and its single-process reference trainer (mlp_reference.h),
// so that both compute every microbatch with the very same float operations
// and differ only in the order gradients are summed.
//
// A block is `layers` layers of width `hidden`; layer l maps a [rows x hidden]
// activation a to z = a W_l + b_l (W_l is [hidden x hidden], row-major, in x
// out) and then tanh(z), except the model's very last layer, which stays
// linear (a regression head). A block's parameters are, per layer, W_l then
// b_l: layers * (hidden * hidden + hidden) floats; its gradients have the
// same layout.
//
// Data is a pure function of its coordinates (a counter-based generator), so
// every rank, replica and the reference see the same numbers without
// communication.
//
// All functions are pure and thread-safe; pointers are borrowed for the
// call. REQUIRES everywhere: the buffers hold the sizes the comments state.
#ifndef JITPIPE_STAGES_REFERENCE_MLP_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_MLP_KERNELS_H_

#include <cstdint>
#include <vector>

namespace jitpipe {

struct MlpShape {
  int hidden = 16;  // width of every layer
  int rows = 4;     // samples per microbatch
  int layers = 2;   // layers per block (per pipeline stage)

  int64_t activation_floats() const { return static_cast<int64_t>(rows) * hidden; }
  int64_t layer_params() const { return static_cast<int64_t>(hidden) * hidden + hidden; }
  int64_t block_params() const { return layers * layer_params(); }
};

// What the data generator makes.
enum class MlpData : uint64_t { kInput = 1, kTarget = 2, kWeight = 3, kBias = 4 };

// A uniform value in [-1, 1) at `index` of the stream named by the rest.
float MlpUniform(uint64_t seed, MlpData what, uint64_t a, uint64_t b, uint64_t c, uint64_t index);

// The initial parameters of block `block` (identical for every copy).
std::vector<float> MlpInitialParams(const MlpShape& shape, uint64_t seed, int block);

// Fills `out` (activation_floats) with the microbatch's input or target.
void MlpFill(const MlpShape& shape, uint64_t seed, MlpData what, int replica, int chain,
             int microbatch, float* out);

// Forward through a block: x [rows x hidden] -> acts [layers][rows x hidden]
// (each layer's output; the block's output is the last). `linear_head`: the
// block's last layer has no tanh.
void MlpBlockForward(const MlpShape& shape, const float* params, const float* x, float* acts,
                     bool linear_head);

// The loss of a microbatch and its gradient: loss = scale * mean((y - t)^2)
// over the rows x hidden elements; grad (may alias nothing) = d loss / d y.
double MlpLoss(const MlpShape& shape, const float* y, const float* t, double scale, float* grad);

// Backward for the inputs: from d loss / d (block output) `grad_out`, fills
// dz [layers][rows x hidden] (d loss / d z per layer, what the weight
// gradients need) and, when grad_in is not null, d loss / d x. `grad_out`
// may be dz's last layer itself.
void MlpBlockBackwardInput(const MlpShape& shape, const float* params, const float* acts,
                           const float* grad_out, float* dz, float* grad_in, bool linear_head);

// Backward for the weights: adds d loss / d params to `grads` (block_params)
// from the block's input x, its layer outputs and dz.
void MlpBlockBackwardWeight(const MlpShape& shape, const float* x, const float* acts,
                            const float* dz, float* grads);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_MLP_KERNELS_H_
