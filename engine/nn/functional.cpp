// nn ops: validation, allocation, the fused kernels, the autograd records.
#include "engine/nn/functional.h"

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/error.h"
#include "engine/memgrad.h"
#include "engine/op_support.h"

namespace memgrad::nn {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::operand;

// An operand for an optional tensor (null data when undefined).
kernels::Operand optional_operand(const Tensor& t) {
  return t.defined() ? operand(t) : kernels::Operand{};
}

void check_floating(const char* op, const Tensor& t) {
  if (!is_floating(t.dtype())) {
    throw DTypeError(
        fmt::format("[{}] expected a floating tensor, got {}", op, dtype_name(t.dtype())), op,
        {t.dtype()});
  }
}

}  // namespace

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  detail::check_defined("layer_norm", input);
  const int k = normalized_shape.size();
  bool ok = k > 0 && k <= input.dim();
  for (int i = 0; ok && i < k; ++i) ok = input.size(input.dim() - k + i) == normalized_shape[i];
  if (!ok) {
    throw ShapeError(fmt::format("[layer_norm] given normalized_shape={}, expected input with "
                                 "shape [*, {}], but got input of size {}",
                                 to_string(normalized_shape), to_string(normalized_shape).substr(1),
                                 to_string(input.sizes())),
                     "layer_norm", ShapeRoles::wanted(normalized_shape, input.sizes()));
  }
  for (const Tensor* p : {&weight, &bias}) {
    if (p->defined() && !(p->sizes() == normalized_shape)) {
      throw ShapeError(fmt::format("[layer_norm] weight/bias of shape {} for normalized_shape {}",
                                   to_string(p->sizes()), to_string(normalized_shape)),
                       "layer_norm", ShapeRoles::wanted(normalized_shape, p->sizes()));
    }
  }
  TraceOpScope trace("layer_norm");
  std::vector<Tensor> in = detail::autocast(OpKind::LayerNorm, {input, weight, bias});
  const Tensor x = in[0].contiguous();
  check_floating("layer_norm", x);
  const int64_t n = numel_of(normalized_shape);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const DType stat = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor y = new_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mean = new_tensor({rows}, stat, x.device());
  Tensor rstd = new_tensor({rows}, stat, x.device());
  const Tensor w = in[1].defined() ? in[1].to(x.dtype()).contiguous() : Tensor();
  const Tensor b = in[2].defined() ? in[2].to(x.dtype()).contiguous() : Tensor();
  kernels_for(x.device())
      .layer_norm(operand(y), operand(mean), operand(rstd), operand(x), optional_operand(w),
                  optional_operand(b), rows, n, eps);
  if (detail::should_record({&x, &w, &b})) {
    detail::record(OpKind::LayerNorm, {x, w, b}, {y, mean, rstd}, LayerNormAttrs{normalized_shape});
  }
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw ValueError(fmt::format("[dropout] probability has to be between 0 and 1, but got {}", p),
                     "dropout", "p", fmt::format("{}", p));
  }
  if (!training || p == 0.0) return x;
  TraceOpScope trace("dropout");
  Generator& g = generator != nullptr ? *generator : default_generator(x.device());
  Tensor mask = new_tensor(x.sizes(), kBool, x.device());
  const uint64_t offset = g.advance(static_cast<uint64_t>(x.numel() + 3) / 4);
  kernels_for(x.device()).bernoulli(operand(mask), g.seed(), offset, 1.0 - p);
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Tensor y;
  {
    // y = x * mask * scale, recorded as one Dropout node rather than two multiplications.
    GradModeGuard no_grad(false);
    y = mul(x, mask);
    y.mul_(scale);
  }
  if (detail::should_record({&x})) {
    detail::record(OpKind::Dropout, {x, mask}, {y}, DropoutAttrs{scale});
  }
  return y;
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target_in, double label_smoothing,
                     int64_t ignore_index, Reduction reduction) {
  detail::check_defined("cross_entropy", logits_in, "input");
  detail::check_defined("cross_entropy", target_in, "target");
  detail::check_same_device("cross_entropy", logits_in, target_in);
  if (target_in.dtype() != kInt64) {
    throw DTypeError(fmt::format("[cross_entropy] target must hold int64 class indices, got {}",
                                 dtype_name(target_in.dtype())),
                     "cross_entropy", {target_in.dtype()});
  }
  const bool single = logits_in.dim() == 1;
  if (logits_in.dim() != 2 && !single) {
    throw ShapeError(fmt::format("[cross_entropy] expected input of shape (N, C) or (C), got {}",
                                 to_string(logits_in.sizes())),
                     "cross_entropy", ShapeRoles::given(logits_in.sizes()));
  }
  const Tensor logits2 = single ? logits_in.unsqueeze(0) : logits_in;
  const Tensor target = (single ? target_in.reshape({1}) : target_in).contiguous();
  if (target.dim() != 1 || target.size(0) != logits2.size(0)) {
    throw ShapeError(fmt::format("[cross_entropy] expected target of shape ({}), got {}",
                                 logits2.size(0), to_string(target_in.sizes())),
                     "cross_entropy", ShapeRoles::operands(logits_in.sizes(), target_in.sizes()));
  }
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
    throw ValueError(
        fmt::format("[cross_entropy] label_smoothing must be in [0, 1], got {}", label_smoothing),
        "cross_entropy", "label_smoothing", fmt::format("{}", label_smoothing));
  }
  TraceOpScope trace("cross_entropy");
  std::vector<Tensor> in = detail::autocast(OpKind::CrossEntropy, {logits2});
  const Tensor logits = in[0].contiguous();
  check_floating("cross_entropy", logits);
  const int64_t rows = logits.size(0);
  Tensor log_probs = new_tensor(logits.sizes(), logits.dtype(), logits.device());
  Tensor losses = new_tensor({rows}, logits.dtype(), logits.device());
  const kernels::IndexCheck check =
      kernels_for(logits.device())
          .cross_entropy(operand(losses), operand(log_probs), operand(logits), operand(target),
                         ignore_index, label_smoothing);
  if (!check.ok) {
    throw IndexError(
        fmt::format("[cross_entropy] target {} is out of bounds for {} classes "
                    "(at row {})",
                    check.value, logits.size(1), check.position),
        "cross_entropy",
        {.index = check.value, .size = logits.size(1), .dim = 1, .position = check.position});
  }
  Tensor out;
  int64_t count = rows;
  {
    GradModeGuard no_grad(false);
    if (reduction == Reduction::None) {
      out = single ? losses.reshape({}) : losses;
    } else {
      out = losses.sum();
      if (reduction == Reduction::Mean) {
        // The mean is over the rows that are not ignored (PyTorch's weighted mean).
        // On a meta device every row counts (docs/estimate.md, "What is assumed").
        count = target.ne(ignore_index).sum().item_or<int64_t>(rows);
        out = out / static_cast<double>(count);
      }
    }
  }
  if (detail::should_record({&logits})) {
    CrossEntropyAttrs attrs;
    attrs.ignore_index = ignore_index;
    attrs.label_smoothing = label_smoothing;
    attrs.grad_scale = reduction == Reduction::Mean ? 1.0 / static_cast<double>(count) : 1.0;
    detail::record(OpKind::CrossEntropy, {logits, target, log_probs}, {out}, attrs);
  }
  return out;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  detail::check_defined("mse_loss", input, "input");
  detail::check_defined("mse_loss", target, "target");
  if (!(input.sizes() == target.sizes())) {
    throw ShapeError(fmt::format("[mse_loss] input {} and target {} must have the same shape",
                                 to_string(input.sizes()), to_string(target.sizes())),
                     "mse_loss", ShapeRoles::operands(input.sizes(), target.sizes()));
  }
  TraceOpScope trace("mse_loss");
  const Tensor sq = square(input - target);
  switch (reduction) {
    case Reduction::None: return sq;
    case Reduction::Sum: return sq.sum();
    case Reduction::Mean: return sq.mean();
  }
  return sq;
}

}  // namespace memgrad::nn
