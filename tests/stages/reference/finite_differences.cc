#include "tests/stages/reference/finite_differences.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace jitpipe::testing {
namespace {

double Objective(const Differentiable& f, const Tensors& inputs, const std::vector<float>& dy) {
  const std::vector<float> y = f.forward(inputs);
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(dy[i]) * y[i];
  return sum;
}

}  // namespace

std::vector<float> Uniform(int64_t count, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(static_cast<size_t>(count));
  for (float& v : out) v = dist(rng);
  return out;
}

FdError CheckGradients(const Differentiable& f, unsigned seed) {
  const std::vector<float> y = f.forward(f.inputs);
  const std::vector<float> dy = Uniform(static_cast<int64_t>(y.size()), -1, 1, seed);
  const Tensors analytic = f.backward(f.inputs, dy);
  FdError out;
  out.smallest_scale = INFINITY;
  Tensors inputs = f.inputs;
  for (size_t t = 0; t < inputs.size(); ++t) {
    double scale = 0, error = 0;
    for (float g : analytic[t]) scale = std::max(scale, std::fabs(static_cast<double>(g)));
    for (size_t i = 0; i < inputs[t].size(); ++i) {
      const float original = inputs[t][i];
      const float eps = kFdEpsilon * std::max(1.0f, std::fabs(original));
      inputs[t][i] = original + eps;
      const double plus = Objective(f, inputs, dy);
      inputs[t][i] = original - eps;
      const double minus = Objective(f, inputs, dy);
      inputs[t][i] = original;
      const double numeric = (plus - minus) / (2.0 * eps);
      error = std::max(error, std::fabs(numeric - analytic[t][i]));
    }
    const double relative = error / std::max(scale, 1e-12);
    if (relative > out.worst) {
      out.worst = relative;
      out.worst_input = static_cast<int>(t);
    }
    out.smallest_scale = std::min(out.smallest_scale, scale);
  }
  return out;
}

}  // namespace jitpipe::testing
