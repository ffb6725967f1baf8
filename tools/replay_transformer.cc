#include "tools/replay_transformer.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "stages/reference/mlp_stage.h"
#if JITPIPE_HAVE_BLAS
#include "stages/reference/transformer_reference.h"
#endif

namespace jitpipe::cli {
namespace {

// The options the target's block runs (fp32 on the host, bf16 on CUDA);
// InvalidArgument naming every flag that differs.
absl::Status CheckRunnable(const TransformerShape& x, TransformerTarget target) {
  const bool cuda = target == TransformerTarget::kCuda;
  std::vector<std::string> wrong;
  if (x.dtype != (cuda ? Dtype::kBf16 : Dtype::kFp32)) {
    wrong.push_back(cuda ? "--dtype bf16" : "--dtype fp32");
  }
  if (!x.swiglu) wrong.push_back("--swiglu");
  if (!x.rmsnorm) wrong.push_back("--rmsnorm");
  if (x.attention != AttentionImpl::kFused) wrong.push_back("--attention fused");
  if (x.recompute != Recompute::kNone) wrong.push_back("--recompute none");
  if (x.dropout) wrong.push_back("no --dropout");
  if (x.tp != 1 || x.sequence_parallel) wrong.push_back("--tp 1 without --sequence-parallel");
  if (x.loss_dtype != Dtype::kFp32) wrong.push_back("--loss-dtype fp32");
  if ((x.hidden / x.heads) % 2 != 0) wrong.push_back("an even head size (hidden / heads)");
  if (wrong.empty()) return absl::OkStatus();
  std::string list;
  for (const std::string& w : wrong) absl::StrAppend(&list, list.empty() ? "" : ", ", w);
  return absl::InvalidArgumentError(absl::StrCat(
      "--stage transformer runs ", cuda ? "a bf16 block (--backend cuda)" : "an fp32 block",
      " with SwiGLU, RMSNorm and fused attention; it needs ", list));
}

// The file's layers against the flags' model: the same sizes layer by layer.
absl::Status CheckSameModel(const std::string& path, const LayeredModel& file,
                            const LayeredModel& flags) {
  const auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", what, "; pass --stage transformer the shape flags `jitpipe model` wrote it "
        "with (--layers, --hidden, --heads, --kv-heads, --ffn, --vocab, --seq, "
        "--microbatch-size, --dtype, --swiglu, --rmsnorm)"));
  };
  if (file.layers.size() != flags.layers.size()) {
    return fail(absl::StrCat("has ", file.layers.size(), " layers but the flags give ",
                             flags.layers.size()));
  }
  if (file.input_bytes != flags.input_bytes) {
    return fail(absl::StrCat("input_bytes ", file.input_bytes, " differs from the flags' ",
                             flags.input_bytes));
  }
  for (size_t i = 0; i < file.layers.size(); ++i) {
    const LayerCost& a = file.layers[i];
    const LayerCost& b = flags.layers[i];
    if (a.kind != b.kind || a.output_bytes != b.output_bytes || a.stash_bytes != b.stash_bytes ||
        a.param_bytes != b.param_bytes) {
      return fail(absl::StrCat("layer ", i, " (", LayerKindName(a.kind), ": output ",
                               a.output_bytes, ", stash ", a.stash_bytes, ", params ",
                               a.param_bytes, " bytes) differs from the flags' (",
                               LayerKindName(b.kind), ": ", b.output_bytes, ", ", b.stash_bytes,
                               ", ", b.param_bytes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool HaveTransformerStage() { return JITPIPE_HAVE_BLAS != 0; }

absl::StatusOr<TransformerReplay> MakeTransformerReplay(const std::string& model_path,
                                                        const TransformerShape& shape,
                                                        const LayeredModel& file_model,
                                                        const Partition& partition,
                                                        const Schedule& lowered, int dp,
                                                        TransformerTarget target) {
  RETURN_IF_ERROR(CheckRunnable(shape, target));
  ASSIGN_OR_RETURN(LayeredModel flags_model, BuildTransformerModel(shape));
  RETURN_IF_ERROR(CheckSameModel(model_path, file_model, flags_model));
#if JITPIPE_HAVE_BLAS
  // Partition indices: 0 the embedding, 1..L the decoder layers, L + 1 the loss.
  const int body = shape.layers;
  TransformerOptions options;
  options.shape = TransformerBlockShape{shape.hidden, shape.heads, shape.KvHeads(), shape.Ffn(),
                                        shape.seq, shape.microbatch_size, shape.vocab};
  for (int s = 0; s < partition.num_stages(); ++s) {
    const int begin = partition.begin(s), end = partition.end(s);
    TransformerStageParts part;
    part.embedding = begin == 0;
    part.loss = end == body + 2;
    part.first_layer = std::max(begin, 1) - 1;
    part.layers = std::min(end, body + 1) - std::max(begin, 1);
    options.parts.push_back(part);
  }
  if (absl::Status valid = ValidateTransformerOptions(options); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(model_path, ": ", valid.message()));
  }
  TransformerReplay out;
  out.options = options;
  if (target == TransformerTarget::kCuda) return out;
  const MlpLayout layout = MlpLayout::Of(lowered, dp);
  auto factory = std::make_unique<TransformerStageFactory>(options, layout);
  TransformerStageFactory* stages = factory.get();
  auto reference = std::make_shared<std::optional<MlpReference>>();
  out.factory = std::move(factory);
  out.check = [stages, reference](double loss, ReduceKind reduce) {
    if (!reference->has_value()) {
      *reference = RunTransformerReference(stages->options(), stages->layout());
    }
    return CompareWithReference(
        **reference, loss, stages->layout(),
        [stages](int stage, int replica) { return stages->FinishedGrads(stage, replica); },
        reduce);
  };
  return out;
#else
  (void)partition;
  (void)lowered;
  (void)dp;
  return absl::UnavailableError(
      "--stage transformer is not in this build: OpenBLAS was not found when it was configured "
      "(tools/install-deps.sh installs libopenblas-dev)");
#endif
}

}  // namespace jitpipe::cli
