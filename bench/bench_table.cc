// bench_table: the README's performance table from Google Benchmark JSON.
//
// Usage: bench_table RESULTS.json...   (each from --benchmark_out=FILE
//        --benchmark_out_format=json)
//
// Prints two markdown tables to stdout:
//   benchmark | size | time | actions/s | target | met?
// with one row per benchmark run (aggregates and errored runs skipped); the
// target comes from the counter "target_ms" (time per iteration) or
// "target_us_per_action" (against the counter "us_per_action" when the suite
// reports one, else time per iteration / "actions"); and, for the runs that report
// "arena_over_peak" (and only in that table), the arena / peak ratios per
// schedule.
// Exit status: 0 when every target is met, 1 when one is missed or a file
// cannot be read, 2 for a usage error.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace {

struct Row {
  std::string name;
  std::string size;
  double time_ms = 0;
  std::optional<double> actions;
  std::optional<double> actions_per_s;
  std::optional<double> target_ms;
  std::optional<double> us_per_action;  // the suite's own measure, if any
  std::optional<double> target_us_per_action;
  std::optional<double> arena_over_peak;
  std::optional<double> arena_over_peak_all;
};

double ToMs(double value, const std::string& unit) {
  if (unit == "ns") return value / 1e6;
  if (unit == "us") return value / 1e3;
  if (unit == "s") return value * 1e3;
  return value;  // "ms"
}

std::optional<double> Number(const nlohmann::json& run, const char* key) {
  auto it = run.find(key);
  if (it == run.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Reads one results file; false (with a message) when it is not one.
bool ReadRows(const std::string& path, std::vector<Row>& rows) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!in.good() || doc.is_discarded() || !doc.contains("benchmarks") ||
      !doc["benchmarks"].is_array()) {
    std::fprintf(stderr, "bench_table: %s is not Google Benchmark JSON output\n", path.c_str());
    return false;
  }
  for (const nlohmann::json& run : doc["benchmarks"]) {
    if (run.value("run_type", "iteration") != "iteration" || run.contains("error_occurred")) {
      continue;
    }
    Row row;
    row.name = run.value("name", "");
    row.size = run.value("label", "");
    row.time_ms = ToMs(Number(run, "real_time").value_or(0), run.value("time_unit", "ns"));
    row.actions = Number(run, "actions");
    row.actions_per_s = Number(run, "actions/s");
    row.target_ms = Number(run, "target_ms");
    row.us_per_action = Number(run, "us_per_action");
    row.target_us_per_action = Number(run, "target_us_per_action");
    row.arena_over_peak = Number(run, "arena_over_peak");
    row.arena_over_peak_all = Number(run, "arena_over_peak_all");
    rows.push_back(row);
  }
  return true;
}

std::string Time(double ms) {
  if (ms >= 1000) return absl::StrFormat("%.2f s", ms / 1000);
  if (ms >= 1) return absl::StrFormat("%.1f ms", ms);
  return absl::StrFormat("%.1f µs", ms * 1000);
}

std::string Rate(std::optional<double> per_s) {
  if (!per_s.has_value()) return "—";
  if (*per_s >= 1e9) return absl::StrFormat("%.2f G", *per_s / 1e9);
  if (*per_s >= 1e6) return absl::StrFormat("%.1f M", *per_s / 1e6);
  if (*per_s >= 1e3) return absl::StrFormat("%.1f k", *per_s / 1e3);
  return absl::StrFormat("%.0f", *per_s);
}

// The target text and whether it is met; nullopt when the row has none.
std::optional<std::pair<std::string, bool>> Target(const Row& row) {
  if (row.target_ms.has_value()) {
    return std::pair{"< " + Time(*row.target_ms), row.time_ms < *row.target_ms};
  }
  if (row.target_us_per_action.has_value() &&
      (row.us_per_action.has_value() || row.actions.value_or(0) > 0)) {
    const double us_per_action = row.us_per_action.value_or(row.time_ms * 1000 / *row.actions);
    return std::pair{absl::StrFormat("≤ %g µs/action (%.2f)", *row.target_us_per_action,
                                     us_per_action),
                     us_per_action <= *row.target_us_per_action};
  }
  return std::nullopt;
}

// Prints the timing table; returns whether every target was met.
bool PrintTimes(const std::vector<Row>& rows) {
  bool all_met = true;
  std::printf("| benchmark | size | time | actions/s | target | met? |\n");
  std::printf("|---|---|---:|---:|---|---|\n");
  for (const Row& row : rows) {
    if (row.arena_over_peak.has_value()) continue;  // in the ratio table
    std::optional<std::pair<std::string, bool>> target = Target(row);
    if (target.has_value()) all_met = all_met && target->second;
    std::printf("| %s | %s | %s | %s | %s | %s |\n", row.name.c_str(), row.size.c_str(),
                Time(row.time_ms).c_str(), Rate(row.actions_per_s).c_str(),
                target.has_value() ? target->first.c_str() : "—",
                target.has_value() ? (target->second ? "yes" : "**no**") : "—");
  }
  return all_met;
}

void PrintArenaRatios(const std::vector<Row>& rows) {
  bool header = false;
  for (const Row& row : rows) {
    if (!row.arena_over_peak.has_value()) continue;
    if (!header) {
      std::printf("\n| schedule (jit) | arena / peak, worst rank | arena / peak, all ranks |\n");
      std::printf("|---|---:|---:|\n");
      header = true;
    }
    std::printf("| %s | %.4f | %.4f |\n", row.size.c_str(), *row.arena_over_peak,
                row.arena_over_peak_all.value_or(NAN));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_table RESULTS.json...\n");
    return 2;
  }
  std::vector<Row> rows;
  bool read_all = true;
  for (int i = 1; i < argc; ++i) read_all = ReadRows(argv[i], rows) && read_all;
  const bool met = PrintTimes(rows);
  PrintArenaRatios(rows);
  return read_all && met ? 0 : 1;
}
