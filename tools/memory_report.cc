#include "tools/memory_report.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/ir/layered_model.h"
#include "base/byte_units.h"

namespace jitpipe::cli {

std::string TrainingSummary(const Model& model, const TrainingMemory& training) {
  const OptimizerSpec& opt = training.optimizer;
  std::string optimizer(OptimizerKindName(opt.kind));
  if (opt.kind != OptimizerKind::kNone) {
    absl::StrAppend(&optimizer, " (", opt.StatesPerParameter(), " ", DtypeName(opt.state_dtype),
                    opt.StatesPerParameter() == 1 ? " state" : " states",
                    opt.HasMasterWeights(model.dp.param_dtype) ? ", fp32 master weights" : "",
                    opt.ZeroStage() >= 1
                        ? absl::StrCat(", sharded over dp ", model.dp.size, " (ZeRO-",
                                       opt.ZeroStage(), ")")
                        : "",
                    ")");
  }
  return absl::StrCat(DtypeName(model.dp.param_dtype), " parameters, ",
                      DtypeName(model.dp.grad_dtype), " gradients, optimizer ", optimizer);
}

std::string MemoryTable(const MemoryReport& report) {
  std::string out = absl::StrFormat("%4s %12s %12s %12s %12s %12s %12s %12s %12s %12s\n",
                                    "rank", "parameters", "unsharded", "gradients", "optimizer",
                                    "activations", "total", "limit", "reserve", "margin");
  for (const RankMemory& r : report.ranks) {
    absl::StrAppendFormat(&out, "%4d %12s %12s %12s %12s %12s %12s %12s %12s %12s\n", r.rank,
                          FormatBytes(r.parameters), FormatBytes(r.unsharded),
                          FormatBytes(r.gradients),
                          FormatBytes(r.optimizer), FormatBytes(r.activations),
                          FormatBytes(r.total()), r.has_limit() ? FormatBytes(r.limit) : "-",
                          r.has_limit() ? FormatBytes(r.reserve) : "-",
                          r.has_limit() ? FormatSignedBytes(r.margin()) : "-");
  }
  absl::StrAppend(&out, "activations: the jit plan's peak of every buffer but the parameter "
                        "gradients (counted as gradients) and the FSDP working copies "
                        "(unsharded, at the same index); margin: limit - reserve - total\n");
  return out;
}

namespace {

std::string Verdict(const RankMemory& r) {
  if (!r.has_limit()) return "no device limit in the model";
  return r.fits() ? absl::StrCat("fits by ", FormatBytes(r.margin()))
                  : absl::StrCat("misses by ", FormatBytes(-r.margin()), " (out of memory)");
}

}  // namespace

std::string HeaviestLine(const MemoryReport& report) {
  const RankMemory& h = report.Heaviest();
  std::string out = absl::StrCat("heaviest rank: ", h.rank, ", ", FormatBytes(h.total()));
  if (h.has_limit()) {
    absl::StrAppend(&out, " of ", FormatBytes(h.limit));
    if (h.reserve > 0) absl::StrAppend(&out, " less a ", FormatBytes(h.reserve), " reserve");
  }
  absl::StrAppend(&out, ": ", Verdict(h));
  const RankMemory& t = report.Tightest();
  if (t.rank != h.rank) {
    absl::StrAppend(&out, "; tightest against its own limit: rank ", t.rank, ", ",
                    FormatBytes(t.total()), " of ", FormatBytes(t.limit), ": ", Verdict(t));
  }
  return out;
}

std::string FitCell(const MemoryReport& report) {
  const RankMemory& t = report.Tightest();
  if (!t.has_limit()) return "no limit";
  return absl::StrCat(t.fits() ? "fits " : "OOM ", FormatSignedBytes(t.margin()));
}

nlohmann::ordered_json MemoryJson(const MemoryReport& report) {
  using Json = nlohmann::ordered_json;
  Json ranks = Json::array();
  for (const RankMemory& r : report.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"parameters_bytes", r.parameters},
                     {"unsharded_bytes", r.unsharded},
                     {"gradients_bytes", r.gradients},
                     {"optimizer_bytes", r.optimizer},
                     {"activations_bytes", r.activations},
                     {"total_bytes", r.total()},
                     {"limit_bytes", r.has_limit() ? Json(r.limit) : Json(nullptr)},
                     {"reserve_bytes", r.has_limit() ? Json(r.reserve) : Json(nullptr)},
                     {"margin_bytes", r.has_limit() ? Json(r.margin()) : Json(nullptr)},
                     {"fits", r.fits()}});
  }
  return Json{{"ranks", std::move(ranks)},
              {"heaviest_rank", report.heaviest},
              {"heaviest_bytes", report.Heaviest().total()},
              {"fits", report.fits()}};
}

}  // namespace jitpipe::cli
