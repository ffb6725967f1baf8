#include "scheduler/ir/model_fields.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"

namespace jitpipe::model_fields {

std::string Field(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string Found(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::Status NotATime(absl::string_view field, absl::string_view found) {
  return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" must be a number from 0 to ",
                                                 kMaxModelUs, ", found ", found));
}

absl::Status NotAWholeNumber(absl::string_view field, int64_t min, absl::string_view found) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", field, "\" must be a whole number >= ", min, ", found ", found));
}

absl::Status ReadTime(const nlohmann::json& obj, absl::string_view key, absl::string_view path,
                      std::optional<double>& out) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_number()) return NotATime(Field(path, key), Found(*it));
  out = it->get<double>();
  return absl::OkStatus();
}

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

absl::StatusOr<Dtype> ReadDtype(const nlohmann::json& obj, absl::string_view key,
                                absl::string_view path, Dtype fallback) {
  if (!obj.contains(std::string(key))) return fallback;
  ASSIGN_OR_RETURN(std::string name, GetString(obj, key, path));
  absl::StatusOr<Dtype> dtype = ParseDtype(name);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Field(path, key), "\": ", dtype.status().message()));
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

namespace {

absl::StatusOr<int> PositiveInt(const nlohmann::json& dp, absl::string_view key,
                                std::optional<int> fallback) {
  auto it = dp.find(std::string(key));
  if (it == dp.end()) return *fallback;
  const std::string field = Field("dp", key);
  ASSIGN_OR_RETURN(int64_t n, WholeNumber(*it, field, 1));
  if (n < 1 || n > std::numeric_limits<int32_t>::max()) {
    return NotAWholeNumber(field, 1, Found(*it));
  }
  return static_cast<int>(n);
}

}  // namespace

absl::Status ParseDataParallel(const nlohmann::json& dp, DataParallelSpec& out) {
  ASSIGN_OR_RETURN(out.size, PositiveInt(dp, "size", out.size));
  ASSIGN_OR_RETURN(out.buckets, PositiveInt(dp, "buckets", out.buckets));
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
  ASSIGN_OR_RETURN(out.param_dtype, ReadDtype(dp, "param_dtype", "dp", Dtype::kFp32));
  ASSIGN_OR_RETURN(out.grad_dtype, ReadDtype(dp, "grad_dtype", "dp", Dtype::kFp32));
  if (auto it = dp.find("reduce_dtype"); it != dp.end() && !it->is_null()) {
    ASSIGN_OR_RETURN(out.reduce_dtype, ReadDtype(dp, "reduce_dtype", "dp", Dtype::kFp32));
  }
  return ParseLink(dp, "dp", out.link);
}

absl::Status CheckTime(const std::optional<double>& t, absl::string_view field) {
  if (t.has_value() && !(std::isfinite(*t) && *t >= 0 && *t <= kMaxModelUs)) {
    return NotATime(field, absl::StrCat(*t));
  }
  return absl::OkStatus();
}

absl::Status CheckBandwidth(const std::optional<double>& gb_per_s, absl::string_view field) {
  if (!gb_per_s.has_value() || *gb_per_s == 0) return absl::OkStatus();
  if (std::isfinite(*gb_per_s) && *gb_per_s >= kMinModelGbPerS && *gb_per_s <= kMaxModelGbPerS) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", field, "\" must be 0 (unlimited) or a number from ", kMinModelGbPerS, " to ",
      kMaxModelGbPerS, " (10^9 bytes per second), found ", *gb_per_s));
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

absl::Status CheckLinks(const Link& p2p, const DataParallelSpec& dp) {
  RETURN_IF_ERROR(CheckTime(p2p.latency_us, "p2p.latency_us"));
  RETURN_IF_ERROR(CheckBandwidth(p2p.gb_per_s, "p2p.gb_per_s"));
  if (dp.size < 1 || dp.size > kMaxDataParallel) {
    return absl::InvalidArgumentError(absl::StrCat("\"dp.size\" must be a whole number from 1 to ",
                                                   kMaxDataParallel, ", found ", dp.size));
  }
  if (dp.buckets < 1 || dp.buckets > kMaxReduceBuckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"dp.buckets\" must be a whole number from 1 to ", kMaxReduceBuckets, ", found ",
        dp.buckets));
  }
  RETURN_IF_ERROR(CheckTime(dp.link.latency_us, "dp.latency_us"));
  return CheckBandwidth(dp.link.gb_per_s, "dp.gb_per_s");
}

absl::Status CheckWholeElements(int64_t bytes, Dtype dtype, absl::string_view field,
                                absl::string_view why) {
  const int element = DtypeBytes(dtype);
  if (bytes % element == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" is ", bytes,
                                                 ", not a whole number of ", DtypeName(dtype),
                                                 " elements (", element, " bytes each; ", why,
                                                 ")"));
}

}  // namespace jitpipe::model_fields
