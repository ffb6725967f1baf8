// The reference transformer's parameters and data, each a pure function of
// its coordinates (a counter-based generator, as mlp_kernels.h's), so that
// every rank, replica and the unpipelined reference see the same numbers
// without communication.
//
// Parameters (transformer_layer.h's layouts): matrices uniform in
// [-1, 1) / sqrt(fan in), norm weights 1 + 0.1 u (not all ones, so their
// gradients are exercised), the embedding table uniform in [-1, 1). Layer
// `layer` of the model is initialised identically wherever it is placed.
// Tokens: sample k of microbatch m (replica, chain) is a sequence of seq + 1
// uniform tokens; the input is its first seq, the targets its last seq (the
// next token at every position).
//
// Pure functions; thread-safe.
#ifndef JITPIPE_STAGES_REFERENCE_TRANSFORMER_DATA_H_
#define JITPIPE_STAGES_REFERENCE_TRANSFORMER_DATA_H_

#include <cstdint>

#include "stages/reference/transformer_kernels.h"

namespace jitpipe {

// Fills `out` (EmbeddingParamFloats).
void InitEmbeddingParams(const TransformerBlockShape& shape, uint64_t seed, float* out);
// Fills `out` (DecoderLayerParamFloats) with layer `layer`'s parameters.
void InitDecoderLayerParams(const TransformerBlockShape& shape, uint64_t seed, int layer,
                            float* out);
// Fills `out` (LossHeadParamFloats).
void InitLossHeadParams(const TransformerBlockShape& shape, uint64_t seed, float* out);

// Fills tokens and targets (rows each; either may be null) of a microbatch.
void FillTokens(const TransformerBlockShape& shape, uint64_t seed, int replica, int chain,
                int microbatch, int64_t* tokens, int64_t* targets);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_TRANSFORMER_DATA_H_
