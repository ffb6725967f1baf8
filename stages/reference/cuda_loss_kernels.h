// The cross entropy of the CUDA transformer's loss head
// (cuda_transformer_layer.cc), as transformer_kernels.h's: the logits [rows x
// vocab] fp32 become their log-softmax in place (the stash's fp32 term), the
// loss is summed per microbatch in double in a fixed order, and the backward
// turns the log-softmax into d loss / d logits in place, with a bf16 copy
// for the input gradient's product.
//
// Launchers as cuda_transformer_kernels.h's. C++17.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_LOSS_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_LOSS_KERNELS_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace jitpipe::reference_cuda {

// logits -> log_softmax in place; row_loss[r] = -log_softmax[r][targets[r]].
cudaError_t LaunchCrossEntropyForward(float* logits, const int64_t* targets, int64_t rows,
                                      int64_t vocab, float* row_loss, cudaStream_t stream);

// *loss = sum(row_loss) / rows x scale (double, one block, fixed order) and,
// when loss_f32 is not null, *loss_f32 = (float) *loss.
cudaError_t LaunchLossSum(const float* row_loss, int64_t rows, double scale, double* loss,
                          float* loss_f32, cudaStream_t stream);

// log_softmax -> scale (softmax - onehot(target)) in place, and its bf16 copy.
cudaError_t LaunchCrossEntropyBackward(float* log_softmax, const int64_t* targets, int64_t rows,
                                       int64_t vocab, float scale, __nv_bfloat16* dlogits,
                                       cudaStream_t stream);

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_LOSS_KERNELS_H_
