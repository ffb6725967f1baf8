#include "scheduler/ir/model.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace jitpipe {
namespace {

constexpr Dtype kAllDtypes[] = {Dtype::kFp32, Dtype::kBf16, Dtype::kFp16, Dtype::kFp8E4m3,
                                Dtype::kFp8E5m2};

std::string Field(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string Found(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::Status NotATime(absl::string_view field, absl::string_view found) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", field, "\" must be a finite number >= 0, found ", found));
}

absl::Status NotAWholeNumber(absl::string_view field, int64_t min, absl::string_view found) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", field, "\" must be a whole number >= ", min, ", found ", found));
}

// Reads obj[key] when present. Range checks (>= 0, finite) are ValidateModel's;
// here only the JSON type is checked, so that both paths share one message.
absl::Status ReadTime(const nlohmann::json& obj, absl::string_view key, absl::string_view path,
                      std::optional<double>& out) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_number()) return NotATime(Field(path, key), Found(*it));
  out = it->get<double>();
  return absl::OkStatus();
}

// A whole JSON number (1e3 counts; 1.5 does not). Negative values pass here
// and are refused by ValidateModel.
absl::StatusOr<int64_t> WholeNumber(const nlohmann::json& value, absl::string_view field,
                                    int64_t min) {
  absl::StatusOr<int64_t> n = AsInt(value, field, std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max());
  if (!n.ok()) return NotAWholeNumber(field, min, Found(value));
  return n;
}

absl::Status ReadBytes(const nlohmann::json& obj, absl::string_view key, absl::string_view path,
                       std::optional<int64_t>& out) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) return absl::OkStatus();
  ASSIGN_OR_RETURN(out, WholeNumber(*it, Field(path, key), 0));
  return absl::OkStatus();
}

absl::StatusOr<const nlohmann::json*> Section(const nlohmann::json& doc, absl::string_view key,
                                              bool array) {
  auto it = doc.find(std::string(key));
  if (it == doc.end()) return nullptr;
  if (array ? !it->is_array() : !it->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be ",
                                                   array ? "an array" : "an object", ", found ",
                                                   Found(*it)));
  }
  return &*it;
}

absl::StatusOr<StageSpec> ParseStageSpec(const nlohmann::json& obj, absl::string_view path) {
  if (!obj.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", path, "\" must be an object, found ", Found(obj)));
  }
  StageSpec s;
  RETURN_IF_ERROR(ReadTime(obj, "forward_us", path, s.forward_us));
  RETURN_IF_ERROR(ReadTime(obj, "backward_input_us", path, s.backward_input_us));
  RETURN_IF_ERROR(ReadTime(obj, "backward_weight_us", path, s.backward_weight_us));
  RETURN_IF_ERROR(ReadTime(obj, "backward_us", path, s.backward_us));
  RETURN_IF_ERROR(ReadTime(obj, "overlap_f_b_us", path, s.overlap_f_b_us));
  RETURN_IF_ERROR(ReadBytes(obj, "input_bytes", path, s.input_bytes));
  RETURN_IF_ERROR(ReadBytes(obj, "output_bytes", path, s.output_bytes));
  RETURN_IF_ERROR(ReadBytes(obj, "stash_bytes", path, s.stash_bytes));
  RETURN_IF_ERROR(ReadBytes(obj, "param_bytes", path, s.param_bytes));
  return s;
}

absl::Status ParseStages(const nlohmann::json& list, Model& model) {
  for (size_t i = 0; i < list.size(); ++i) {
    std::string path = absl::StrCat("stages[", i, "]");
    ASSIGN_OR_RETURN(StageSpec spec, ParseStageSpec(list[i], path));
    auto index = list[i].find("index");
    if (index == list[i].end()) {
      return absl::InvalidArgumentError(absl::StrCat("missing \"", path, ".index\""));
    }
    ASSIGN_OR_RETURN(int64_t n, WholeNumber(*index, Field(path, "index"), 0));
    if (n < 0 || n > std::numeric_limits<int32_t>::max()) {
      return NotAWholeNumber(Field(path, "index"), 0, Found(*index));
    }
    model.stages.push_back({static_cast<int>(n), spec});
  }
  return absl::OkStatus();
}

absl::StatusOr<Dtype> ReadDtype(const nlohmann::json& dp, absl::string_view key, Dtype fallback) {
  if (!dp.contains(std::string(key))) return fallback;
  ASSIGN_OR_RETURN(std::string name, GetString(dp, key, "dp"));
  absl::StatusOr<Dtype> dtype = ParseDtype(name);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("\"dp.", key, "\": ", dtype.status().message()));
  }
  return dtype;
}

absl::Status ParseLink(const nlohmann::json& obj, absl::string_view path, Link& link) {
  std::optional<double> latency, bandwidth;
  RETURN_IF_ERROR(ReadTime(obj, "latency_us", path, latency));
  RETURN_IF_ERROR(ReadTime(obj, "gb_per_s", path, bandwidth));
  link.latency_us = latency.value_or(0);
  link.gb_per_s = bandwidth.value_or(0);
  return absl::OkStatus();
}

absl::Status ParseDataParallel(const nlohmann::json& dp, DataParallelSpec& out) {
  if (auto size = dp.find("size"); size != dp.end()) {
    ASSIGN_OR_RETURN(int64_t n, WholeNumber(*size, "dp.size", 1));
    if (n < 1 || n > std::numeric_limits<int32_t>::max()) {
      return NotAWholeNumber("dp.size", 1, Found(*size));
    }
    out.size = static_cast<int>(n);
  }
  if (auto buckets = dp.find("buckets"); buckets != dp.end()) {
    ASSIGN_OR_RETURN(int64_t n, WholeNumber(*buckets, "dp.buckets", 1));
    if (n < 1 || n > std::numeric_limits<int32_t>::max()) {
      return NotAWholeNumber("dp.buckets", 1, Found(*buckets));
    }
    out.buckets = static_cast<int>(n);
  }
  if (dp.contains("reduce")) {
    ASSIGN_OR_RETURN(std::string reduce, GetString(dp, "reduce", "dp"));
    if (reduce == "all_reduce") {
      out.reduce = ReduceKind::kAllReduce;
    } else if (reduce == "reduce_scatter") {
      out.reduce = ReduceKind::kReduceScatter;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("\"dp.reduce\" is ", JsonQuote(reduce),
                                                     "; expected all_reduce or reduce_scatter"));
    }
  }
  ASSIGN_OR_RETURN(out.param_dtype, ReadDtype(dp, "param_dtype", Dtype::kFp32));
  ASSIGN_OR_RETURN(out.grad_dtype, ReadDtype(dp, "grad_dtype", Dtype::kFp32));
  if (auto it = dp.find("reduce_dtype"); it != dp.end() && !it->is_null()) {
    ASSIGN_OR_RETURN(out.reduce_dtype, ReadDtype(dp, "reduce_dtype", Dtype::kFp32));
  }
  return ParseLink(dp, "dp", out.link);
}

absl::StatusOr<Model> FromDocument(const nlohmann::json& doc) {
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kModelFormat, kModelVersion));
  Model model;
  ASSIGN_OR_RETURN(const nlohmann::json* defaults, Section(doc, "defaults", false));
  if (defaults != nullptr) {
    ASSIGN_OR_RETURN(model.defaults, ParseStageSpec(*defaults, "defaults"));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* stages, Section(doc, "stages", true));
  if (stages != nullptr) RETURN_IF_ERROR(ParseStages(*stages, model));
  ASSIGN_OR_RETURN(const nlohmann::json* p2p, Section(doc, "p2p", false));
  if (p2p != nullptr) RETURN_IF_ERROR(ParseLink(*p2p, "p2p", model.p2p));
  ASSIGN_OR_RETURN(const nlohmann::json* dp, Section(doc, "dp", false));
  if (dp != nullptr) RETURN_IF_ERROR(ParseDataParallel(*dp, model.dp));
  RETURN_IF_ERROR(ValidateModel(model));
  return model;
}

absl::Status CheckTime(const std::optional<double>& t, absl::string_view field) {
  if (t.has_value() && !(std::isfinite(*t) && *t >= 0)) return NotATime(field, absl::StrCat(*t));
  return absl::OkStatus();
}

absl::Status CheckBytes(const std::optional<int64_t>& b, absl::string_view field) {
  if (b.has_value() && *b < 0) return NotAWholeNumber(field, 0, absl::StrCat(*b));
  if (b.has_value() && *b > kMaxModelBytes) {
    return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" is ", *b,
                                                   " bytes; at most ", kMaxModelBytes,
                                                   " (1 TiB) per buffer"));
  }
  return absl::OkStatus();
}

absl::Status CheckStageSpec(const StageSpec& s, absl::string_view path, Dtype param_dtype) {
  RETURN_IF_ERROR(CheckTime(s.forward_us, Field(path, "forward_us")));
  RETURN_IF_ERROR(CheckTime(s.backward_input_us, Field(path, "backward_input_us")));
  RETURN_IF_ERROR(CheckTime(s.backward_weight_us, Field(path, "backward_weight_us")));
  RETURN_IF_ERROR(CheckTime(s.backward_us, Field(path, "backward_us")));
  RETURN_IF_ERROR(CheckTime(s.overlap_f_b_us, Field(path, "overlap_f_b_us")));
  RETURN_IF_ERROR(CheckBytes(s.input_bytes, Field(path, "input_bytes")));
  RETURN_IF_ERROR(CheckBytes(s.output_bytes, Field(path, "output_bytes")));
  RETURN_IF_ERROR(CheckBytes(s.stash_bytes, Field(path, "stash_bytes")));
  RETURN_IF_ERROR(CheckBytes(s.param_bytes, Field(path, "param_bytes")));
  const int element = DtypeBytes(param_dtype);
  if (s.param_bytes.has_value() && *s.param_bytes % element != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", Field(path, "param_bytes"), "\" is ", *s.param_bytes, ", not a whole number of ",
        DtypeName(param_dtype), " elements (", element, " bytes each; dp.param_dtype)"));
  }
  return absl::OkStatus();
}

template <typename T>
T Pick(const std::optional<T>& over, const std::optional<T>& base) {
  return over.has_value() ? *over : base.value_or(T{});
}

}  // namespace

absl::string_view DtypeName(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32: return "fp32";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp16: return "fp16";
    case Dtype::kFp8E4m3: return "fp8_e4m3";
    case Dtype::kFp8E5m2: return "fp8_e5m2";
  }
  return "?";
}

int DtypeBytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32: return 4;
    case Dtype::kBf16:
    case Dtype::kFp16: return 2;
    case Dtype::kFp8E4m3:
    case Dtype::kFp8E5m2: return 1;
  }
  return 1;
}

absl::StatusOr<Dtype> ParseDtype(absl::string_view name) {
  for (Dtype d : kAllDtypes) {
    if (DtypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype ", JsonQuote(name), "; expected fp32, bf16, fp16, fp8_e4m3 or fp8_e5m2"));
}

absl::string_view ReduceKindName(ReduceKind kind) {
  return kind == ReduceKind::kAllReduce ? "all_reduce" : "reduce_scatter";
}

double Link::TransferUs(double bytes) const {
  return latency_us + (gb_per_s > 0 ? bytes / (gb_per_s * 1e3) : 0.0);
}

double DataParallelSpec::TrafficFraction() const {
  const double n = size;
  return (reduce == ReduceKind::kAllReduce ? 2.0 : 1.0) * (n - 1) / n;
}

StageCost Model::ForStage(int stage) const {
  StageSpec over;
  for (const StageOverride& o : stages) {
    if (o.index == stage) over = o.spec;
  }
  StageCost c;
  c.forward_us = Pick(over.forward_us, defaults.forward_us);
  c.backward_input_us = Pick(over.backward_input_us, defaults.backward_input_us);
  c.backward_weight_us = Pick(over.backward_weight_us, defaults.backward_weight_us);
  const std::optional<double>& full = over.backward_us ? over.backward_us : defaults.backward_us;
  c.backward_us = full.value_or(c.backward_input_us + c.backward_weight_us);
  const std::optional<double>& overlap =
      over.overlap_f_b_us ? over.overlap_f_b_us : defaults.overlap_f_b_us;
  c.overlap_f_b_given = overlap.has_value();
  c.overlap_f_b_us = overlap.value_or(c.forward_us + c.backward_us);
  c.input_bytes = Pick(over.input_bytes, defaults.input_bytes);
  c.output_bytes = Pick(over.output_bytes, defaults.output_bytes);
  c.stash_bytes = Pick(over.stash_bytes, defaults.stash_bytes);
  c.param_bytes = Pick(over.param_bytes, defaults.param_bytes);
  return c;
}

int64_t Model::ParamElements(int stage) const {
  return ForStage(stage).param_bytes / DtypeBytes(dp.param_dtype);
}

int64_t Model::GradBytes(int stage) const {
  return ParamElements(stage) * DtypeBytes(dp.grad_dtype);
}

int64_t Model::ReduceBytes(int stage) const {
  return ParamElements(stage) * DtypeBytes(dp.EffectiveReduceDtype());
}

double Model::ReduceTrafficBytes(int stage) const {
  return static_cast<double>(ReduceBytes(stage)) * dp.TrafficFraction();
}

double Model::ComputeUs(const Action& action) const {
  switch (action.kind) {
    case ActionKind::kForward: return ForStage(action.stage).forward_us;
    case ActionKind::kBackward: return ForStage(action.stage).backward_us;
    case ActionKind::kBackwardInput: return ForStage(action.stage).backward_input_us;
    case ActionKind::kBackwardWeight: return ForStage(action.stage).backward_weight_us;
    case ActionKind::kOverlapFB: {
      double sum = 0;
      for (const Action& part : action.sub_actions) {
        if (part.kind == ActionKind::kForward) {
          StageCost forward = ForStage(part.stage);
          if (forward.overlap_f_b_given) return forward.overlap_f_b_us;
        }
        sum += ComputeUs(part);
      }
      return sum;
    }
    default: return 0;
  }
}

absl::Status ValidateModel(const Model& model) {
  RETURN_IF_ERROR(CheckStageSpec(model.defaults, "defaults", model.dp.param_dtype));
  absl::flat_hash_map<int, size_t> seen;  // stage index -> first entry
  for (size_t i = 0; i < model.stages.size(); ++i) {
    std::string path = absl::StrCat("stages[", i, "]");
    const int index = model.stages[i].index;
    if (index < 0) return NotAWholeNumber(Field(path, "index"), 0, absl::StrCat(index));
    auto [it, inserted] = seen.emplace(index, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("\"", path, ".index\" is ", index,
                                                     ", already overridden by stages[",
                                                     it->second, "]"));
    }
    RETURN_IF_ERROR(CheckStageSpec(model.stages[i].spec, path, model.dp.param_dtype));
  }
  RETURN_IF_ERROR(CheckTime(model.p2p.latency_us, "p2p.latency_us"));
  RETURN_IF_ERROR(CheckTime(model.p2p.gb_per_s, "p2p.gb_per_s"));
  if (model.dp.size < 1) return NotAWholeNumber("dp.size", 1, absl::StrCat(model.dp.size));
  if (model.dp.buckets < 1) {
    return NotAWholeNumber("dp.buckets", 1, absl::StrCat(model.dp.buckets));
  }
  RETURN_IF_ERROR(CheckTime(model.dp.link.latency_us, "dp.latency_us"));
  return CheckTime(model.dp.link.gb_per_s, "dp.gb_per_s");
}

absl::Status CheckModelFits(const Model& model, int num_stages) {
  for (size_t i = 0; i < model.stages.size(); ++i) {
    if (model.stages[i].index >= num_stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"stages[", i, "].index\" is ", model.stages[i].index,
                       " but the schedule has ", num_stages, " stages (0 to ", num_stages - 1,
                       ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Model> ParseModelJson(absl::string_view text) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text));
  return FromDocument(doc);
}

absl::StatusOr<Model> LoadModel(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::StatusOr<Model> model = ParseModelJson(text);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat(path, ": ", model.status().message()));
  }
  return model;
}

}  // namespace jitpipe
