#include "scheduler/ir/model.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model_fields.h"

namespace jitpipe {
namespace {

using model_fields::CheckBytes;
using model_fields::CheckLinks;
using model_fields::CheckTime;
using model_fields::CheckWholeElements;
using model_fields::Field;
using model_fields::Found;
using model_fields::NotAWholeNumber;
using model_fields::ParseDataParallel;
using model_fields::ParseLink;
using model_fields::ReadBytes;
using model_fields::ReadTime;
using model_fields::Section;
using model_fields::WholeNumber;

constexpr Dtype kAllDtypes[] = {Dtype::kFp32, Dtype::kBf16, Dtype::kFp16, Dtype::kFp8E4m3,
                                Dtype::kFp8E5m2};

// "stash_segments": an array of whole numbers (ranges and count:
// CheckStashSegments).
absl::Status ReadStashSegments(const nlohmann::json& obj, absl::string_view path,
                               std::optional<std::vector<int64_t>>& out) {
  auto it = obj.find("stash_segments");
  if (it == obj.end()) return absl::OkStatus();
  const std::string field = Field(path, "stash_segments");
  if (!it->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", field, "\" must be an array of byte sizes, found ", Found(*it)));
  }
  std::vector<int64_t> segments;
  segments.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    ASSIGN_OR_RETURN(int64_t bytes, WholeNumber((*it)[i], absl::StrCat(field, "[", i, "]"), 0));
    segments.push_back(bytes);
  }
  out = std::move(segments);
  return absl::OkStatus();
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
  RETURN_IF_ERROR(ReadStashSegments(obj, path, s.stash_segments));
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

absl::StatusOr<Model> FromDocument(const nlohmann::json& doc) {
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kModelFormat, kLayeredModelVersion));
  if (doc["version"] != kModelVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a version ", kLayeredModelVersion, " model describes layers, not stages; this needs "
        "version ", kModelVersion, " (or a command that partitions layers into stages)"));
  }
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

// Each segment in bytes' range, at most kMaxStashSegments of them, and their
// sum stash_bytes when that is given too.
absl::Status CheckStashSegments(const StageSpec& s, absl::string_view path) {
  if (!s.stash_segments.has_value() || s.stash_segments->empty()) return absl::OkStatus();
  const std::string field = Field(path, "stash_segments");
  const std::vector<int64_t>& segments = *s.stash_segments;
  if (segments.size() > static_cast<size_t>(kMaxStashSegments)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" has ", segments.size(),
                                                   " segments; at most ", kMaxStashSegments));
  }
  int64_t sum = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    RETURN_IF_ERROR(CheckBytes(segments[i], absl::StrCat(field, "[", i, "]")));
    sum += segments[i];  // < 2^16 x 2^40: no overflow
  }
  if (sum > kMaxModelBytes) {
    return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" sum to ", sum,
                                                   " bytes; at most ", kMaxModelBytes,
                                                   " (1 TiB) per stash"));
  }
  if (s.stash_bytes.has_value() && *s.stash_bytes != sum) {
    return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" sum to ", sum,
                                                   " bytes but \"", Field(path, "stash_bytes"),
                                                   "\" is ", *s.stash_bytes));
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
  RETURN_IF_ERROR(CheckStashSegments(s, path));
  RETURN_IF_ERROR(CheckBytes(s.param_bytes, Field(path, "param_bytes")));
  if (!s.param_bytes.has_value()) return absl::OkStatus();
  return CheckWholeElements(*s.param_bytes, param_dtype, Field(path, "param_bytes"),
                            "dp.param_dtype");
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
  const StageSpec& stash =
      over.stash_bytes.has_value() || over.stash_segments.has_value() ? over : defaults;
  c.stash_segments = stash.stash_segments.value_or(std::vector<int64_t>{});
  c.stash_bytes = stash.stash_bytes.value_or(
      std::accumulate(c.stash_segments.begin(), c.stash_segments.end(), int64_t{0}));
  c.param_bytes = Pick(over.param_bytes, defaults.param_bytes);
  return c;
}

std::vector<int64_t> StageCost::StashAllocations() const {
  if (stash_segments.empty()) return {stash_bytes};
  return stash_segments;
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

Model UnitCostModel() {
  Model m;
  m.defaults.forward_us = 1;
  m.defaults.backward_input_us = 1;
  m.defaults.backward_weight_us = 1;
  return m;
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
  return CheckLinks(model.p2p, model.dp);
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

absl::StatusOr<Model> LoadModel(const std::string& path, std::uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, max_bytes));
  absl::StatusOr<Model> model = ParseModelJson(text);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat(path, ": ", model.status().message()));
  }
  return model;
}

}  // namespace jitpipe
