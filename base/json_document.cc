#include "base/json_document.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/json_text.h"
#include "absl/strings/str_format.h"

namespace jitpipe {
namespace {

std::string LineColumn(absl::string_view text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return absl::StrCat("line ", line, ", column ", column);
}

// Finds the first byte where nesting exceeds the limit, outside strings.
// Returns text.size() when the depth is fine.
size_t FindTooDeep(absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return text.size();
}

// Error messages quote input; bytes that are not printable ASCII are shown
// as <XX> so that a message is always valid UTF-8 and one line.
std::string Printable(absl::string_view text) {
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("<%02X>", u));
    } else {
      out += c;
    }
  }
  return out;
}

std::string Describe(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    default:
      return absl::StrCat("the number ", v.dump());
  }
}

std::string FieldName(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonDocument(absl::string_view text) {
  if (size_t at = FindTooDeep(text); at < text.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        LineColumn(text, at), ": JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    return absl::InvalidArgumentError(
        absl::StrCat(LineColumn(text, byte), ": invalid JSON: ", Printable(detail)));
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: "[json.exception.out_of_range.406] number overflow parsing '1e999'", without a
    // position: the number's first standalone occurrence in the text gives it.
    const std::string what = e.what();
    const size_t open = what.find('\'');
    const size_t close = what.rfind('\'');
    if (e.id == 406 && open != std::string::npos && close > open) {
      const std::string number = what.substr(open + 1, close - open - 1);
      size_t at = text.find(number);
      while (at != absl::string_view::npos && at > 0 &&
             (std::isdigit(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '.')) {
        at = text.find(number, at + 1);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          at == absl::string_view::npos ? "" : absl::StrCat(LineColumn(text, at), ": "),
          "invalid JSON: the number ", QuoteForMessage(number),
          " is out of range (beyond a 64-bit float)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", Printable(what)));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", Printable(e.what())));
  }
}

absl::Status CheckFormatAndVersion(const nlohmann::json& doc, absl::string_view format,
                                   int max_version) {
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a JSON object with \"format\": \"", format, "\", found ",
                     Describe(doc)));
  }
  auto it = doc.find("format");
  if (it == doc.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing \"format\" (expected \"", format, "\")"));
  }
  if (!it->is_string() || it->get<std::string>() != format) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"format\" is ", it->dump(), "; expected \"", format, "\""));
  }
  auto v = doc.find("version");
  if (v == doc.end()) return absl::InvalidArgumentError("missing \"version\"");
  auto version = AsInt(*v, "\"version\"", 1, std::numeric_limits<int32_t>::max());
  if (!version.ok()) return version.status();
  if (*version > max_version) {
    return absl::InvalidArgumentError(absl::StrCat(
        format, " version ", *version, " was written by a newer jitpipe; this build reads ",
        "versions up to ", max_version));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AsInt(const nlohmann::json& value, absl::string_view what, int64_t min,
                              int64_t max) {
  int64_t n = 0;
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is too large: ", value.dump()));
    }
    n = value.get<int64_t>();
  } else if (value.is_number_float()) {
    double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " must be a whole number, found ", value.dump()));
    }
    n = static_cast<int64_t>(d);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be an integer, found ", Describe(value)));
  }
  if (n < min || n > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", n, "; expected ", min, " to ", max));
  }
  return n;
}

absl::StatusOr<int64_t> GetInt(const nlohmann::json& obj, absl::string_view key,
                               absl::string_view path, int64_t min, int64_t max) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing \"", FieldName(path, key), "\""));
  }
  return AsInt(*it, absl::StrCat("\"", FieldName(path, key), "\""), min, max);
}

absl::StatusOr<std::string> GetString(const nlohmann::json& obj, absl::string_view key,
                                      absl::string_view path) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing \"", FieldName(path, key), "\""));
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", FieldName(path, key), "\" must be a string, found ", Describe(*it)));
  }
  return it->get<std::string>();
}

absl::StatusOr<bool> GetBool(const nlohmann::json& obj, absl::string_view key,
                             absl::string_view path) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing \"", FieldName(path, key), "\""));
  }
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", FieldName(path, key), "\" must be true or false, found ", Describe(*it)));
  }
  return it->get<bool>();
}

absl::StatusOr<double> GetNumber(const nlohmann::json& obj, absl::string_view key,
                                 absl::string_view path) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing \"", FieldName(path, key), "\""));
  }
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", FieldName(path, key), "\" must be a number, found ", Describe(*it)));
  }
  return it->get<double>();
}

std::string AbbreviateForMessage(absl::string_view s) {
  if (s.size() <= kMaxQuotedBytes) return Printable(std::string(s));
  return absl::StrCat(Printable(absl::StrCat(s.substr(0, 48), "...", s.substr(s.size() - 12))),
                      " (", s.size(), " bytes)");
}

std::string QuoteForMessage(absl::string_view s) {
  if (s.size() <= kMaxQuotedBytes) return JsonQuote(s);
  // Cut at byte boundaries; JsonQuote replaces a UTF-8 sequence cut in two.
  std::string shown = absl::StrCat(s.substr(0, 48), "...", s.substr(s.size() - 12));
  return absl::StrCat(JsonQuote(shown), " (", s.size(), " bytes)");
}

std::string JsonQuote(absl::string_view s) {
  std::string out;
  AppendJsonString(&out, s);  // the one escaper (json_text.h)
  return out;
}

}  // namespace jitpipe
