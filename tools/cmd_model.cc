// jitpipe model --layers L --hidden H --heads A --vocab V --seq S --tflops T
// [shape and training options] [-o FILE]: a version 2 model file (layers,
// embedding and loss heads, device, optimizer, dp, p2p) from a decoder-only
// transformer's shape, through planning/transformer.h's cited formulas.
// Without -o the file goes to stdout; with -o a summary goes to stdout.
// --calibrate REPLAY.json: the times fitted to a replay's measured stage
// call times instead (planning/calibrate.h, tools/calibration_report.h).
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "planning/calibrate.h"
#include "tools/calibration_report.h"
#include "planning/transformer.h"
#include "tools/transformer_flags.h"
#include "scheduler/ir/layered_model.h"
#include "base/byte_units.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

ABSL_DECLARE_FLAG(int, dp);  // cmd_replay.cc

ABSL_FLAG(int, layers, 0, "transformer layers (L)");
ABSL_FLAG(int64_t, hidden, 0, "hidden size (h)");
ABSL_FLAG(int, heads, 0, "attention heads (a)");
ABSL_FLAG(int, kv_heads, 0, "key/value heads for grouped-query attention; 0: as many as heads");
ABSL_FLAG(int64_t, ffn, 0, "MLP hidden size (f); 0: 4 x hidden");
ABSL_FLAG(int64_t, vocab, 0, "vocabulary size, padded to a multiple of --tp (V)");
ABSL_FLAG(int64_t, seq, 0, "sequence length (s)");
ABSL_FLAG(int64_t, microbatch_size, 1, "sequences per microbatch (b)");
ABSL_FLAG(int, tp, 1, "tensor-parallel size (t)");
ABSL_FLAG(std::string, dtype, "bf16", "activation and parameter dtype: bf16, fp16 or fp32");
ABSL_FLAG(double, tflops, 0, "achieved throughput per GPU, in 10^12 FLOP/s");
ABSL_FLAG(bool, sequence_parallel, false, "split the norms' and dropouts' activations over tp");
ABSL_FLAG(bool, swiglu, false, "gated MLP with three matrices (Llama)");
ABSL_FLAG(bool, rmsnorm, false, "RMSNorm (one vector per norm) instead of LayerNorm");
ABSL_FLAG(std::string, attention, "fused",
          "attention core: fused (flash-style: no s x s scores kept) or eager (softmax output "
          "kept, s x s per head)");
ABSL_FLAG(bool, dropout, false, "the model has dropout layers (their masks are kept)");
ABSL_FLAG(std::string, loss_dtype, "fp32", "the dtype the cross entropy runs in: fp32 or bf16");
ABSL_FLAG(bool, tied_embeddings, false,
          "the output layer shares the embedding's matrix (counted once in the parameter "
          "total; each pipeline stage that holds one keeps its copy)");
ABSL_FLAG(bool, explain, false,
          "print what one decoder layer, the embedding and the loss head keep for their "
          "backward, term by term, with the formula and its source");
ABSL_FLAG(std::string, recompute, "none",
          "activation recomputation: none, selective (the attention core) or full (whole layers)");
ABSL_FLAG(std::string, grad_dtype, "fp32", "gradient dtype");
ABSL_FLAG(std::string, optimizer, "adam", "optimizer: adam, sgd or none");
ABSL_FLAG(bool, distributed_optimizer, false,
          "shard optimizer states and master weights over the dp replicas (ZeRO-1; --zero 1)");
ABSL_FLAG(int, zero, 0,
          "ZeRO stage over the dp replicas: 1 optimizer states and master weights, 2 also the "
          "gradients (between steps; whole while microbatches accumulate), 3 also the "
          "parameters (FSDP; lower with --fsdp to say when each stage is unsharded)");
ABSL_FLAG(std::string, device_memory, "",
          "each GPU's memory, e.g. 80GiB or 85899345920 (default: no limit)");
ABSL_FLAG(double, p2p_gb_per_s, 0, "pipeline link bandwidth, 10^9 B/s (0: infinite)");
ABSL_FLAG(double, p2p_latency_us, 0, "pipeline link latency");
ABSL_FLAG(double, dp_gb_per_s, 0, "gradient reduction bandwidth per rank, 10^9 B/s (0: infinite)");
ABSL_FLAG(double, dp_latency_us, 0, "gradient reduction latency per collective");
ABSL_FLAG(std::string, reduce, "all_reduce", "gradient reduction: all_reduce or reduce_scatter");
ABSL_FLAG(int, buckets, 1, "gradient reduction buckets per stage");
ABSL_FLAG(std::string, calibrate, "",
          "REPLAY.json: the times are fitted to the stage call times measured by `jitpipe replay "
          "--stage transformer --json` of this shape (planning/calibrate.h) instead of FLOPs at "
          "--tflops; the bytes are the same");

namespace jitpipe::cli {

absl::StatusOr<TransformerShape> TransformerShapeFromFlags(std::optional<double> tflops) {
  TransformerShape x;
  x.layers = absl::GetFlag(FLAGS_layers);
  x.hidden = absl::GetFlag(FLAGS_hidden);
  x.heads = absl::GetFlag(FLAGS_heads);
  x.kv_heads = absl::GetFlag(FLAGS_kv_heads);
  x.ffn = absl::GetFlag(FLAGS_ffn);
  x.vocab = absl::GetFlag(FLAGS_vocab);
  x.seq = absl::GetFlag(FLAGS_seq);
  x.microbatch_size = absl::GetFlag(FLAGS_microbatch_size);
  x.tp = absl::GetFlag(FLAGS_tp);
  x.sequence_parallel = absl::GetFlag(FLAGS_sequence_parallel);
  x.swiglu = absl::GetFlag(FLAGS_swiglu);
  x.rmsnorm = absl::GetFlag(FLAGS_rmsnorm);
  x.tflops = tflops.value_or(absl::GetFlag(FLAGS_tflops));
  absl::StatusOr<Dtype> dtype = ParseDtype(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
  x.dtype = *dtype;
  absl::StatusOr<Recompute> recompute = ParseRecompute(absl::GetFlag(FLAGS_recompute));
  if (!recompute.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--recompute: ", recompute.status().message()));
  }
  x.recompute = *recompute;
  absl::StatusOr<AttentionImpl> attention = ParseAttentionImpl(absl::GetFlag(FLAGS_attention));
  if (!attention.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--attention: ", attention.status().message()));
  }
  x.attention = *attention;
  x.dropout = absl::GetFlag(FLAGS_dropout);
  x.tied_embeddings = absl::GetFlag(FLAGS_tied_embeddings);
  absl::StatusOr<Dtype> loss_dtype = ParseDtype(absl::GetFlag(FLAGS_loss_dtype));
  if (!loss_dtype.ok() || (*loss_dtype != Dtype::kFp32 && *loss_dtype != Dtype::kBf16)) {
    return absl::InvalidArgumentError(absl::StrCat("--loss-dtype must be fp32 or bf16, not \"",
                                                   absl::GetFlag(FLAGS_loss_dtype), "\""));
  }
  x.loss_dtype = *loss_dtype;
  if (x.kv_heads < 0 || x.ffn < 0) {
    return absl::InvalidArgumentError("--kv-heads and --ffn must be >= 0 (0: the default)");
  }
  if (absl::Status valid = ValidateTransformerShape(x); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", valid.message()));
  }
  return x;
}

namespace {

absl::Status NonNegative(double value, absl::string_view flag) {
  if (std::isfinite(value) && value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be a finite number >= 0, got ", value));
}

// The training setup around the shape: dtypes, optimizer, device, links.
absl::Status SetupFromFlags(LayeredModel& model) {
  absl::StatusOr<Dtype> grad = ParseDtype(absl::GetFlag(FLAGS_grad_dtype));
  if (!grad.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--grad-dtype: ", grad.status().message()));
  }
  model.dp.grad_dtype = *grad;
  const std::string optimizer = absl::GetFlag(FLAGS_optimizer);
  if (optimizer == "adam") {
    model.optimizer.kind = OptimizerKind::kAdam;
  } else if (optimizer == "sgd") {
    model.optimizer.kind = OptimizerKind::kSgd;
  } else if (optimizer == "none") {
    model.optimizer.kind = OptimizerKind::kNone;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer must be adam, sgd or none, not \"", optimizer, "\""));
  }
  model.optimizer.shard_over_dp = absl::GetFlag(FLAGS_distributed_optimizer);
  const int zero = absl::GetFlag(FLAGS_zero);
  if (zero < 0 || zero > 3) return absl::InvalidArgumentError("--zero must be 0, 1, 2 or 3");
  model.optimizer.zero = zero;
  if (const std::string memory = absl::GetFlag(FLAGS_device_memory); !memory.empty()) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(memory);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--device-memory: ", bytes.status().message()));
    }
    model.device.memory_bytes = *bytes;
  }
  const int dp = absl::GetFlag(FLAGS_dp);
  const int buckets = absl::GetFlag(FLAGS_buckets);
  if (dp < 0 || buckets < 1) {
    return absl::InvalidArgumentError("--dp must be >= 1 and --buckets >= 1");
  }
  model.dp.size = dp == 0 ? 1 : dp;
  model.dp.buckets = buckets;
  const std::string reduce = absl::GetFlag(FLAGS_reduce);
  if (reduce != "all_reduce" && reduce != "reduce_scatter") {
    return absl::InvalidArgumentError(
        absl::StrCat("--reduce must be all_reduce or reduce_scatter, not \"", reduce, "\""));
  }
  model.dp.reduce = reduce == "all_reduce" ? ReduceKind::kAllReduce : ReduceKind::kReduceScatter;
  model.p2p = {.latency_us = absl::GetFlag(FLAGS_p2p_latency_us),
               .gb_per_s = absl::GetFlag(FLAGS_p2p_gb_per_s)};
  model.dp.link = {.latency_us = absl::GetFlag(FLAGS_dp_latency_us),
                   .gb_per_s = absl::GetFlag(FLAGS_dp_gb_per_s)};
  for (const auto& [value, flag] : {std::pair{model.p2p.latency_us, "p2p-latency-us"},
                                    std::pair{model.p2p.gb_per_s, "p2p-gb-per-s"},
                                    std::pair{model.dp.link.latency_us, "dp-latency-us"},
                                    std::pair{model.dp.link.gb_per_s, "dp-gb-per-s"}}) {
    if (absl::Status s = NonNegative(value, flag); !s.ok()) return s;
  }
  return ValidateLayeredModel(model);
}

std::string Ms(double us) { return absl::StrFormat("%.3g ms", us / 1000); }

std::string LayerLine(const LayerCost& layer) {
  return absl::StrCat("forward ", Ms(layer.forward_us), ", input backward ",
                      Ms(layer.backward_input_us), ", weight backward ",
                      Ms(layer.backward_weight_us), "; stash ", FormatBytes(layer.stash_bytes),
                      ", output ", FormatBytes(layer.output_bytes), ", parameters ",
                      FormatBytes(layer.param_bytes));
}

// The model's parameters, the output layer counted once when tied.
int64_t ParamElementsOnce(const TransformerShape& x, const LayeredModel& m) {
  return m.ParamElements() - (x.tied_embeddings ? EmbeddingFormula(x).param_elements : 0);
}

void PrintTerms(const char* title, const std::vector<ActivationTerm>& terms, int64_t stash) {
  std::printf("%s: %s per microbatch\n", title, FormatBytes(stash).c_str());
  if (terms.empty()) std::printf("  (nothing: its backward needs only its input)\n");
  for (const ActivationTerm& t : terms) {
    std::printf("  %-62s %-16s %12s  %s\n", t.name.c_str(), t.formula.c_str(),
                FormatBytes(static_cast<int64_t>(std::llround(t.bytes))).c_str(),
                t.source.c_str());
  }
}

// --explain: what each kind of layer keeps for its backward.
void PrintExplanation(const TransformerShape& x) {
  std::printf("what is kept for the backward, per microbatch on one tensor-parallel rank "
              "(s %lld, b %lld, h %lld, a %d, g %lld, f %lld, V %lld, t %d, e %d bytes; "
              "attention %s, dropout %s, recompute %s):\n",
              static_cast<long long>(x.seq), static_cast<long long>(x.microbatch_size),
              static_cast<long long>(x.hidden), x.heads, static_cast<long long>(x.KvHeads()),
              static_cast<long long>(x.Ffn()), static_cast<long long>(x.vocab), x.tp,
              DtypeBytes(x.dtype), std::string(AttentionImplName(x.attention)).c_str(),
              x.dropout ? "yes" : "no", std::string(RecomputeName(x.recompute)).c_str());
  PrintTerms("decoder layer", BodyLayerActivations(x), BodyLayerFormula(x).stash_bytes);
  PrintTerms("embedding", EmbeddingActivations(x), EmbeddingFormula(x).stash_bytes);
  PrintTerms("loss head", LossActivations(x), LossFormula(x).stash_bytes);
  std::printf("sources: [K] Korthikanti et al. 2023, [F] Dao 2024 (FlashAttention-2), [S] "
              "Shazeer 2020 (SwiGLU), [M] Megatron-LM's memory estimate, [P] PyTorch's "
              "norm and log-softmax kernels; planning/transformer.h cites each\n");
}

void PrintSummary(const std::string& path, const TransformerShape& x, const LayeredModel& m,
                  const std::string& times_from) {
  const int64_t params = ParamElementsOnce(x, m);
  std::printf("wrote %s: embedding + %d decoder layers + loss, %.4g billion parameters per tp "
              "rank (tp %d, %s, recompute %s, attention %s%s%s%s)\n",
              path.c_str(), x.layers, params / 1e9, x.tp, std::string(DtypeName(x.dtype)).c_str(),
              std::string(RecomputeName(x.recompute)).c_str(),
              std::string(AttentionImplName(x.attention)).c_str(), x.dropout ? ", dropout" : "",
              x.tied_embeddings ? ", tied embeddings" : "",
              x.sequence_parallel ? ", sequence parallel" : "");
  std::printf("per microbatch of %lld x %lld tokens, times %s:\n",
              static_cast<long long>(x.microbatch_size), static_cast<long long>(x.seq),
              times_from.empty() ? absl::StrFormat("at %.4g TFLOP/s per GPU", x.tflops).c_str()
                                 : times_from.c_str());
  std::printf("  decoder layer: %s\n", LayerLine(m.layers[1]).c_str());
  std::printf("  embedding:     %s\n", LayerLine(m.layers.front()).c_str());
  std::printf("  loss:          %s\n", LayerLine(m.layers.back()).c_str());
  const Dtype p = m.dp.param_dtype;
  const int64_t state = m.optimizer.StateBytes(1'000'000, p, m.dp.size);
  std::printf("per parameter: %d B %s + %d B %s gradient + %.4g B %s state%s\n", DtypeBytes(p),
              std::string(DtypeName(p)).c_str(), DtypeBytes(m.dp.grad_dtype),
              std::string(DtypeName(m.dp.grad_dtype)).c_str(), state / 1e6,
              std::string(OptimizerKindName(m.optimizer.kind)).c_str(),
              m.optimizer.ZeroStage() >= 1
                  ? absl::StrCat(" (sharded over dp ", m.dp.size, ", ZeRO-",
                                 m.optimizer.ZeroStage(), ")")
                        .c_str()
                  : "");
  if (m.device.memory_bytes > 0) {
    std::printf("device memory: %s per GPU\n", FormatBytes(m.device.memory_bytes).c_str());
  }
  std::printf("model FLOPs per microbatch (forward and backward, no recomputation): %.4g%s\n",
              m.workload.model_flops_per_microbatch,
              m.device.peak_tflops > 0
                  ? absl::StrFormat("; peak %.4g TFLOP/s per GPU (for MFU)", m.device.peak_tflops)
                        .c_str()
                  : "");
}

// --calibrate: the model's times fitted to the replay's stage call times;
// `times_from` says so for the summary. Errors name the report.
absl::Status Calibrate(const std::string& report_path, const TransformerShape& shape,
                       LayeredModel& model, std::string& times_from) {
  absl::StatusOr<std::string> text = ReadFile(report_path, MaxInputBytes());
  if (!text.ok()) return text.status();
  absl::StatusOr<ReplayCalibrationInput> input =
      ReadReplayForCalibration(report_path, *text, shape);
  if (!input.ok()) return input.status();
  absl::StatusOr<Calibration> fit = CalibrateLayeredModel(model, input->stages);
  if (!fit.ok()) {
    return absl::Status(fit.status().code(),
                        absl::StrCat(report_path, ": ", fit.status().message()));
  }
  model = std::move(fit->model);
  times_from = absl::StrFormat(
      "measured by %s (%d step%s, %zu stages; %s fit%s; worst stage residual %.1f%% at %s)",
      report_path, input->counted_steps, input->counted_steps == 1 ? "" : "s",
      input->stages.size(), CalibrationGroupingName(fit->grouping),
      fit->backward_split_by_base ? ", B split into I and W by the FLOP ratio" : "",
      100 * fit->worst_relative_residual, fit->worst_at);
  return absl::OkStatus();
}

int RunModel(const Command& command, const Invocation& invocation) {
  const std::string calibrate = absl::GetFlag(FLAGS_calibrate);
  for (absl::string_view flag : {"layers", "hidden", "heads", "vocab", "seq", "tflops"}) {
    if (flag == "tflops" && !calibrate.empty()) continue;  // the times are measured
    if (!invocation.IsSet(flag)) {
      return UsageError(command, absl::StrCat("missing --", flag, "; usage: jitpipe ",
                                              command.synopsis));
    }
  }
  // Calibrating, the FLOP model is the prior of the fit (its ratios only).
  absl::StatusOr<TransformerShape> shape = TransformerShapeFromFlags(
      calibrate.empty() || invocation.IsSet("tflops") ? std::optional<double>() : 1.0);
  if (!shape.ok()) return UsageError(command, shape.status().message());
  absl::StatusOr<LayeredModel> model = BuildTransformerModel(*shape);
  if (!model.ok()) return UsageError(command, model.status().message());
  if (absl::Status s = SetupFromFlags(*model); !s.ok()) return UsageError(command, s.message());
  std::string times_from;
  if (!calibrate.empty()) {
    if (absl::Status s = Calibrate(calibrate, *shape, *model, times_from); !s.ok()) {
      return Fail(command, s);
    }
  }
  if (absl::Status s = ApplyPeakFlag(invocation.IsSet("peak_tflops"), model->device); !s.ok()) {
    return UsageError(command, s.message());
  }
  const std::string text = LayeredModelToJson(*model);
  const std::string out = absl::GetFlag(FLAGS_output);
  if (absl::GetFlag(FLAGS_explain)) {
    PrintExplanation(*shape);
    if (out.empty()) return kExitOk;  // the breakdown alone
  }
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  if (absl::Status s = WriteFileAtomically(out, text); !s.ok()) return Fail(command, s);
  PrintSummary(out, *shape, *model, times_from);
  return kExitOk;
}

}  // namespace

Command ModelCommand() {
  return Command{
      .name = "model",
      .synopsis = "model --layers L --hidden H --heads A --vocab V --seq S --tflops T "
                  "[--kv-heads G] [--ffn F] [--microbatch-size B] [--tp T] [--dtype D] "
                  "[--recompute none|selective|full] [--attention fused|eager] [--dropout] "
                  "[--device-memory BYTES] [--peak-tflops P] [--calibrate REPLAY.json] [--explain] "
                  "[-o FILE]",
      .summary =
          "Write a version 2 model file (layers, embedding and loss heads, device memory, "
          "optimizer, dp and p2p) for a decoder-only transformer. Times come from FLOP counts "
          "(Narayanan et al. 2021) at --tflops per GPU; activation memory per layer and "
          "microbatch is what each tensor the block keeps for its backward costs: Korthikanti "
          "et al. 2022's terms for the classic block (with and without recomputation), a fused "
          "attention kernel's log-sum-exp instead of the s x s scores (the default), SwiGLU's "
          "gate, up and product, K and V of the key/value heads, the norms' statistics, the "
          "loss head's logits in the loss dtype (--explain prints them); parameters and "
          "optimizer bytes as Megatron-LM's theoretical memory estimate counts them; "
          "planning/transformer.h cites each formula. The file also records the workload "
          "(microbatch size, sequence length, tp, model FLOPs per microbatch) and "
          "--peak-tflops, from which compare derives tokens/s and MFU. --calibrate REPLAY.json "
          "(then --tflops is optional) fits the embedding's, a decoder layer's and the loss "
          "head's F, I and W times to the stage call times `jitpipe replay --stage transformer "
          "--json` measured with the same shape flags, by least squares over the stages and "
          "their layers (planning/calibrate.h), keeping the bytes. Without -o the file goes to "
          "stdout.",
      .flags = {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
                "microbatch_size", "tp", "dtype", "tflops", "sequence_parallel", "swiglu",
                "rmsnorm", "recompute", "attention", "dropout", "loss_dtype", "tied_embeddings",
                "explain", "grad_dtype", "optimizer", "distributed_optimizer", "zero",
                "device_memory", "peak_tflops", "dp", "buckets", "reduce", "dp_gb_per_s",
                "dp_latency_us", "p2p_gb_per_s", "p2p_latency_us", "calibrate", "output"},
      .min_positional = 0,
      .max_positional = 0,
      .run = RunModel,
  };
}

}  // namespace jitpipe::cli
