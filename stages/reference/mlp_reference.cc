#include "stages/reference/mlp_reference.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jitpipe {

// Index spaces: replica k, chain c, microbatch m of the chain, block b
// (= stage within the chain).
MlpReference RunMlpReference(const MlpOptions& options, const MlpLayout& layout) {
  const MlpShape& s = options.shape;
  const int blocks = layout.stages_per_chain;
  const int64_t n = s.activation_floats();
  std::vector<std::vector<float>> params;
  MlpReference out;
  for (int b = 0; b < blocks; ++b) {
    params.push_back(MlpInitialParams(s, options.seed, b));
    out.block_grads.emplace_back(static_cast<size_t>(s.block_params()), 0.0f);
  }
  std::vector<float> x(static_cast<size_t>(n)), target(static_cast<size_t>(n));
  // Per block: its layers' outputs and dz; the gradient passed between blocks.
  std::vector<std::vector<float>> acts(blocks, std::vector<float>(s.layers * n));
  std::vector<std::vector<float>> dz(blocks, std::vector<float>(s.layers * n));
  std::vector<float> grad(static_cast<size_t>(n));
  for (int k = 0; k < layout.dp; ++k) {
    for (int c = 0; c < layout.chains; ++c) {
      for (int m = 0; m < layout.microbatches_per_chain(); ++m) {
        MlpFill(s, options.seed, MlpData::kInput, k, c, m, x.data());
        for (int b = 0; b < blocks; ++b) {
          const float* in = b == 0 ? x.data() : acts[b - 1].data() + (s.layers - 1) * n;
          MlpBlockForward(s, params[b].data(), in, acts[b].data(), b == blocks - 1);
        }
        MlpFill(s, options.seed, MlpData::kTarget, k, c, m, target.data());
        out.loss += MlpLoss(s, acts[blocks - 1].data() + (s.layers - 1) * n, target.data(),
                            layout.loss_scale(), grad.data());
        for (int b = blocks - 1; b >= 0; --b) {
          MlpBlockBackwardInput(s, params[b].data(), acts[b].data(), grad.data(), dz[b].data(),
                                b == 0 ? nullptr : grad.data(), b == blocks - 1);
          const float* in = b == 0 ? x.data() : acts[b - 1].data() + (s.layers - 1) * n;
          MlpBlockBackwardWeight(s, in, acts[b].data(), dz[b].data(), out.block_grads[b].data());
        }
      }
    }
  }
  return out;
}

std::string MlpComparison::ToString() const {
  return absl::StrFormat(
      "loss %.9g (reference %.9g, relative error %.3g); worst gradient error %.3g (block %d, "
      "replica %d)",
      loss, reference_loss, loss_error, worst_grad_error, worst_block, worst_replica);
}

absl::StatusOr<MlpComparison> CompareWithReference(const MlpReference& reference, double loss,
                                                   const MlpStageFactory& factory,
                                                   ReduceKind reduce) {
  return CompareWithReference(
      reference, loss, factory.layout(),
      [&](int stage, int replica) { return factory.FinishedGrads(stage, replica); }, reduce);
}

absl::StatusOr<MlpComparison> CompareWithReference(
    const MlpReference& reference, double loss, const MlpLayout& layout,
    absl::FunctionRef<std::vector<float>(int stage, int replica)> finished, ReduceKind reduce) {
  MlpComparison out;
  out.loss = loss;
  out.reference_loss = reference.loss;
  out.loss_error = std::abs(loss - reference.loss) / std::max(std::abs(reference.loss), 1e-300);
  std::vector<float> sum;
  for (int k = 0; k < layout.dp; ++k) {
    for (int b = 0; b < layout.stages_per_chain; ++b) {
      // Blocks may differ in size (the transformer's parts do).
      const std::vector<float>& ref = reference.block_grads[b];
      const size_t elements = ref.size();
      // Under reduce-scatter replica k holds elements [begin, end) of the sum.
      size_t begin = 0, end = elements;
      if (reduce == ReduceKind::kReduceScatter) {
        const size_t shard = elements / static_cast<size_t>(layout.dp);
        begin = shard * static_cast<size_t>(k);
        end = begin + shard;
      }
      sum.assign(elements, 0.0f);
      for (int c = 0; c < layout.chains; ++c) {
        const int stage = c * layout.stages_per_chain + b;
        const std::vector<float> g = finished(stage, k);
        if (g.size() != elements) {
          return absl::FailedPreconditionError(absl::StrCat(
              "stage ", stage, " of replica ", k, " reported no gradients"));
        }
        for (size_t e = begin; e < end; ++e) sum[e] += g[e];
      }
      double largest = 0, worst = 0;
      for (size_t e = 0; e < elements; ++e) largest = std::max(largest, std::abs(double{ref[e]}));
      for (size_t e = begin; e < end; ++e) {
        worst = std::max(worst, std::abs(double{sum[e]} - double{ref[e]}));
      }
      const double error = worst / std::max(largest, 1e-300);
      if (error > out.worst_grad_error || out.worst_block < 0) {
        out.worst_grad_error = error;
        out.worst_block = b;
        out.worst_replica = k;
      }
    }
  }
  return out;
}

}  // namespace jitpipe
