#include "planning/calibrate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// The call kinds fitted: F, I, W, or B (I + W) when a stage ran B.
enum Call { kF, kI, kW, kB };
constexpr std::array<const char*, 4> kCallName = {"F", "I", "W", "B"};

double BaseTime(const LayerCost& layer, Call call) {
  switch (call) {
    case kF:
      return layer.forward_us;
    case kI:
      return layer.backward_input_us;
    case kW:
      return layer.backward_weight_us;
    case kB:
      return layer.backward_input_us + layer.backward_weight_us;
  }
  return 0;
}

double MeasuredTime(const MeasuredStage& s, Call call) {
  switch (call) {
    case kF:
      return s.forward_us;
    case kI:
      return s.backward_input_us;
    case kW:
      return s.backward_weight_us;
    case kB:
      return s.split_backward ? s.backward_input_us + s.backward_weight_us : s.backward_us;
  }
  return 0;
}

// Where a layer goes in the design matrix: its group's column and the
// weight of the group's unknown in the layer's time.
struct Column {
  int group = 0;  // 0 .. kGroups - 1 before compaction
  double weight = 1;
};
constexpr int kGroups = 3;

Column ColumnOf(const LayerCost& layer, CalibrationGrouping grouping, Call call) {
  switch (grouping) {
    case CalibrationGrouping::kPerKind:
      return {static_cast<int>(layer.kind), 1};
    case CalibrationGrouping::kHeadsScaled:
      if (layer.kind == LayerKind::kLayer) return {0, 1};
      return {1, BaseTime(layer, call)};
    case CalibrationGrouping::kOneScale:
      return {0, BaseTime(layer, call)};
  }
  return {};
}

using Matrix = std::vector<std::vector<double>>;

// The design matrix (rows: stages; columns: the groups some layer falls
// in) and, per layer, its column (-1: none) and weight.
struct Design {
  Matrix a;
  std::vector<int> column_of_layer;
  std::vector<double> weight_of_layer;
  int columns = 0;
};

Design MakeDesign(const LayeredModel& base, absl::Span<const MeasuredStage> stages,
                  CalibrationGrouping grouping, Call call) {
  std::array<int, kGroups> compact;
  compact.fill(-1);
  Design d;
  for (const LayerCost& layer : base.layers) {
    const Column c = ColumnOf(layer, grouping, call);
    if (compact[c.group] < 0) compact[c.group] = d.columns++;
    d.column_of_layer.push_back(compact[c.group]);
    d.weight_of_layer.push_back(c.weight);
  }
  for (const MeasuredStage& s : stages) {
    std::vector<double> row(d.columns, 0.0);
    for (int l = s.first_layer; l < s.end_layer; ++l) row[d.column_of_layer[l]] += d.weight_of_layer[l];
    d.a.push_back(std::move(row));
  }
  return d;
}

// Least squares over the columns in `free` (the others held at 0), by the
// normal equations with partial pivoting; false when those columns are
// linearly dependent (a pivot below 1e-9 of the largest diagonal).
bool SolveLeastSquares(const Matrix& a, const std::vector<double>& t, const std::vector<int>& free,
                       std::vector<double>& x) {
  const int n = static_cast<int>(free.size());
  Matrix m(n, std::vector<double>(n + 1, 0.0));  // [A^T A | A^T t] over the free columns
  double largest = 0;
  for (int i = 0; i < n; ++i) {
    for (size_t r = 0; r < a.size(); ++r) {
      for (int j = 0; j < n; ++j) m[i][j] += a[r][free[i]] * a[r][free[j]];
      m[i][n] += a[r][free[i]] * t[r];
    }
    largest = std::max(largest, m[i][i]);
  }
  if (largest <= 0) return n == 0;
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    }
    if (std::abs(m[pivot][col]) < 1e-9 * largest) return false;
    std::swap(m[col], m[pivot]);
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c <= n; ++c) m[r][c] -= f * m[col][c];
    }
  }
  std::fill(x.begin(), x.end(), 0.0);
  for (int i = 0; i < n; ++i) x[free[i]] = m[i][n] / m[i][i];
  return true;
}

bool FullRank(const Design& d) {
  std::vector<int> all(d.columns);
  for (int i = 0; i < d.columns; ++i) all[i] = i;
  std::vector<double> x(d.columns);
  return SolveLeastSquares(d.a, std::vector<double>(d.a.size(), 0.0), all, x);
}

// Non-negative fit: the most negative unknown is held at 0 and the rest
// refitted until none is negative. REQUIRES: FullRank(d).
std::vector<double> FitNonNegative(const Design& d, const std::vector<double>& t) {
  std::vector<int> free(d.columns);
  for (int i = 0; i < d.columns; ++i) free[i] = i;
  std::vector<double> x(d.columns, 0.0);
  while (SolveLeastSquares(d.a, t, free, x)) {
    auto worst = std::min_element(free.begin(), free.end(),
                                  [&](int i, int j) { return x[i] < x[j]; });
    if (worst == free.end() || x[*worst] >= 0) return x;
    free.erase(worst);
  }
  return x;  // unreachable: a subset of independent columns is independent
}

absl::Status CheckStages(const LayeredModel& base, absl::Span<const MeasuredStage> stages) {
  const int layers = static_cast<int>(base.layers.size());
  bool any = false;
  for (size_t i = 0; i < stages.size(); ++i) {
    const MeasuredStage& s = stages[i];
    if (s.first_layer < 0 || s.first_layer > s.end_layer || s.end_layer > layers) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", i, " holds layers [", s.first_layer,
                                                     ", ", s.end_layer, "); the model has ",
                                                     layers));
    }
    for (double t : {s.forward_us, s.backward_input_us, s.backward_weight_us, s.backward_us}) {
      if (!std::isfinite(t) || t < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", i, " has a call time of ", t, " us"));
      }
    }
    any = any || s.end_layer > s.first_layer;
  }
  if (!any) return absl::InvalidArgumentError("no measured stage holds a layer");
  return absl::OkStatus();
}

}  // namespace

absl::string_view CalibrationGroupingName(CalibrationGrouping grouping) {
  switch (grouping) {
    case CalibrationGrouping::kPerKind:
      return "per-kind";
    case CalibrationGrouping::kHeadsScaled:
      return "heads-scaled";
    case CalibrationGrouping::kOneScale:
      return "one-scale";
  }
  return "?";
}

absl::StatusOr<Calibration> CalibrateLayeredModel(const LayeredModel& base,
                                                  absl::Span<const MeasuredStage> stages) {
  RETURN_IF_ERROR(ValidateLayeredModel(base));
  RETURN_IF_ERROR(CheckStages(base, stages));
  Calibration out;
  out.model = base;
  out.backward_split_by_base = !std::all_of(stages.begin(), stages.end(), [](const MeasuredStage& s) {
    return s.split_backward || s.end_layer == s.first_layer;
  });
  const std::vector<Call> calls =
      out.backward_split_by_base ? std::vector<Call>{kF, kB} : std::vector<Call>{kF, kI, kW};
  // The finest grouping the stages can tell apart, for every call kind.
  bool found = false;
  for (CalibrationGrouping g : {CalibrationGrouping::kPerKind, CalibrationGrouping::kHeadsScaled,
                                CalibrationGrouping::kOneScale}) {
    found = std::all_of(calls.begin(), calls.end(),
                        [&](Call c) { return FullRank(MakeDesign(base, stages, g, c)); });
    if (found) {
      out.grouping = g;
      break;
    }
  }
  if (!found) {
    return absl::FailedPreconditionError(
        "the measured stages cannot be fitted: the model's base times are 0 for a call kind the "
        "stages ran");
  }
  const int n = static_cast<int>(base.layers.size());
  std::vector<std::array<double, 4>> fitted(n, {0, 0, 0, 0});  // by Call
  for (Call call : calls) {
    const Design d = MakeDesign(base, stages, out.grouping, call);
    std::vector<double> t;
    for (const MeasuredStage& s : stages) t.push_back(MeasuredTime(s, call));
    const std::vector<double> x = FitNonNegative(d, t);
    for (int l = 0; l < n; ++l) fitted[l][call] = x[d.column_of_layer[l]] * d.weight_of_layer[l];
    for (size_t s = 0; s < stages.size(); ++s) {
      if (t[s] <= 0) continue;
      double sum = 0;
      for (int l = stages[s].first_layer; l < stages[s].end_layer; ++l) sum += fitted[l][call];
      const double residual = std::abs(sum - t[s]) / t[s];
      if (residual > out.worst_relative_residual || out.worst_at.empty()) {
        out.worst_relative_residual = residual;
        out.worst_at = absl::StrCat("stage ", s, " ", kCallName[call]);
      }
    }
  }
  for (int l = 0; l < n; ++l) {
    LayerCost& layer = out.model.layers[l];
    const LayerCost& prior = base.layers[l];
    layer.forward_us = fitted[l][kF];
    if (!out.backward_split_by_base) {
      layer.backward_input_us = fitted[l][kI];
      layer.backward_weight_us = fitted[l][kW];
      continue;
    }
    const double prior_b = BaseTime(prior, kB);
    const double input_share = prior_b > 0 ? prior.backward_input_us / prior_b : 0.5;
    layer.backward_input_us = fitted[l][kB] * input_share;
    layer.backward_weight_us = fitted[l][kB] - layer.backward_input_us;
  }
  return out;
}

}  // namespace jitpipe
