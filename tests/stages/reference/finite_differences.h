// A central-difference gradient check for the reference transformer's
// kernels: a function of some float tensors to one output tensor, its
// analytic backward, and the largest disagreement between the two.
//
// The check differentiates L = sum_i dy_i y_i (accumulated in double) with
// respect to every element of every input: numeric dL/dt = (L(t + eps) -
// L(t - eps)) / 2 eps, eps = kFdEpsilon x max(1, |t|). The kernels run in
// fp32, so the numeric gradient carries about 1e-4 of absolute noise (fp32
// rounding of L over 2 eps, plus eps² truncation): errors are reported
// relative to the tensor's largest analytic gradient.
#ifndef JITPIPE_TESTS_STAGES_REFERENCE_FINITE_DIFFERENCES_H_
#define JITPIPE_TESTS_STAGES_REFERENCE_FINITE_DIFFERENCES_H_

#include <functional>
#include <string>
#include <vector>

namespace jitpipe::testing {

using Tensors = std::vector<std::vector<float>>;

inline constexpr float kFdEpsilon = 1e-2f;

struct Differentiable {
  std::string name;
  Tensors inputs;
  std::function<std::vector<float>(const Tensors& inputs)> forward;
  // d L / d inputs, one per input, for the output gradient dy.
  std::function<Tensors(const Tensors& inputs, const std::vector<float>& dy)> backward;
};

struct FdError {
  double worst = 0;      // the largest relative error over the inputs
  int worst_input = -1;  // which input
  double smallest_scale = 0;  // the smallest of the inputs' largest |gradient|
};

// Checks f with a deterministic dy (uniform in [-1, 1), from `seed`).
FdError CheckGradients(const Differentiable& f, unsigned seed);

// `count` uniform values in [lo, hi) from `seed`.
std::vector<float> Uniform(int64_t count, float lo, float hi, unsigned seed);

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_STAGES_REFERENCE_FINITE_DIFFERENCES_H_
