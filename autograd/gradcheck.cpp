// gradcheck: full Jacobians, analytic (backward) and numerical (central differences).
#include "autograd/gradcheck.h"

#include <cmath>

#include <fmt/format.h>

#include "autograd/backward.h"
#include "autograd/grad_mode.h"
#include "engine/memgrad.h"

namespace memgrad::autograd {
namespace {

using Jacobian = std::vector<std::vector<double>>;  // [input element][output element]

std::vector<double> evaluate(const TestFunction& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to(kFloat64).contiguous().to_vector<double>();
}

Jacobian analytic_jacobian(const TestFunction& fn, const std::vector<Tensor>& inputs,
                           const Tensor& leaf) {
  const Tensor out = fn(inputs);
  Jacobian jac(static_cast<size_t>(leaf.numel()),
               std::vector<double>(static_cast<size_t>(out.numel())));
  if (!out.requires_grad()) return jac;  // the output does not depend on any input
  for (int64_t j = 0; j < out.numel(); ++j) {
    std::vector<double> onehot(static_cast<size_t>(out.numel()), 0.0);
    onehot[static_cast<size_t>(j)] = 1.0;
    const Tensor g = from_vector(onehot, out.sizes(), TensorOptions(out.dtype()));
    const std::vector<Tensor> grads = grad({out}, {leaf}, {g}, /*retain_graph=*/true,
                                           /*allow_unused=*/true);
    if (!grads[0].defined()) continue;
    const std::vector<double> row = grads[0].to(kFloat64).contiguous().to_vector<double>();
    for (size_t i = 0; i < row.size(); ++i) jac[i][static_cast<size_t>(j)] = row[i];
  }
  return jac;
}

Jacobian numerical_jacobian(const TestFunction& fn, const std::vector<Tensor>& inputs,
                            const Tensor& leaf, double eps) {
  double* x = leaf.data_ptr<double>();
  Jacobian jac;
  for (int64_t i = 0; i < leaf.numel(); ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const std::vector<double> plus = evaluate(fn, inputs);
    x[i] = saved - eps;
    const std::vector<double> minus = evaluate(fn, inputs);
    x[i] = saved;
    std::vector<double> column(plus.size());
    for (size_t j = 0; j < plus.size(); ++j) column[j] = (plus[j] - minus[j]) / (2 * eps);
    jac.push_back(std::move(column));
  }
  return jac;
}

}  // namespace

GradcheckResult gradcheck(const TestFunction& fn, const std::vector<Tensor>& inputs,
                          const std::string& name, double eps, double atol, double rtol) {
  GradcheckResult result;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& leaf = inputs[k];
    if (!leaf.defined() || !leaf.requires_grad()) continue;
    if (leaf.dtype() != kFloat64 || !leaf.is_contiguous() || !leaf.is_leaf() ||
        !leaf.device().is_host()) {
      throw ValueError(
          fmt::format("[gradcheck] input {} must be a contiguous float64 host leaf "
                      "(got {} {}, contiguous {})",
                      k, dtype_name(leaf.dtype()), to_string(leaf.sizes()), leaf.is_contiguous()),
          "gradcheck", fmt::format("inputs[{}]", k));
    }
    const Jacobian analytic = analytic_jacobian(fn, inputs, leaf);
    const Jacobian numeric = numerical_jacobian(fn, inputs, leaf, eps);
    for (size_t i = 0; i < numeric.size(); ++i) {
      for (size_t j = 0; j < numeric[i].size(); ++j) {
        const double a = analytic[i][j], n = numeric[i][j];
        const double diff = std::abs(a - n);
        result.max_abs_diff = std::max(result.max_abs_diff, diff);
        if (!(diff <= atol + rtol * std::abs(n)) && result.ok) {
          result.ok = false;
          result.report = fmt::format(
              "gradcheck failed for {}: input {} (shape {}), element {}, output element {}: "
              "analytic {:.8g}, numerical {:.8g}",
              name, k, to_string(leaf.sizes()), i, j, a, n);
        }
      }
    }
  }
  if (!result.ok) result.report += fmt::format("; max |diff| {:.3g}", result.max_abs_diff);
  return result;
}

}  // namespace memgrad::autograd
