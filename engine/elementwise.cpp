// Elementwise front-end: result dtypes and shapes, the kernel call, the autograd record.
#include "engine/elementwise.h"

#include <fmt/format.h>

#include "allocator/trace.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/op_support.h"
#include "engine/reduce.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::operand;
using detail::should_record;
using kernels::BinaryOp;
using kernels::UnaryOp;

// Transcendental ops of int64/bool tensors produce float32 (PyTorch's default float dtype).
DType float_result(DType d) { return is_floating(d) ? d : kFloat32; }

// PyTorch's rule for a tensor op a Python number: a floating tensor keeps its dtype; an integral
// tensor with a floating scalar becomes float32; a bool tensor with an integer scalar int64.
DType scalar_result(DType tensor, Scalar s) {
  if (is_floating(tensor)) return tensor;
  if (s.is_floating()) return kFloat32;
  if (tensor == kBool && s.is_integral()) return kInt64;
  return tensor;
}

DType binary_result(const char* name, BinaryOp op, DType a, DType b) {
  if (kernels::is_comparison(op)) return kBool;
  const DType d = promote_types(a, b);
  if (op == BinaryOp::Sub && a == kBool && b == kBool) {
    throw DTypeError(fmt::format("[{}] subtraction of two bool tensors is not supported; use "
                                 "logical_xor or ~ (logical_not) instead",
                                 name),
                     name, {a, b});
  }
  if (op == BinaryOp::Div) return float_result(d);
  return d;
}

Shape result_shape(const char* name, const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() ? a.sizes() : broadcast_shapes(a.sizes(), b.sizes(), name);
}

void check_binary(const char* name, const Tensor& a, const Tensor& b) {
  detail::check_defined(name, a, "self");
  detail::check_defined(name, b, "other");
  detail::check_same_device(name, a, b);
}

// add and sub carry their alpha; the other binary ops need nothing beyond their tensors.
OpAttrs binary_attrs(OpKind kind, double alpha) {
  if (kind == OpKind::Add || kind == OpKind::Sub) return AlphaAttrs{alpha};
  return NoAttrs{};
}

Tensor binary_op(const char* name, BinaryOp op, std::optional<OpKind> kind, const Tensor& a,
                 const Tensor& b, double alpha) {
  check_binary(name, a, b);
  TraceOpScope trace(name);
  const Shape shape = result_shape(name, a, b);
  Tensor out = new_tensor(shape, binary_result(name, op, a.dtype(), b.dtype()), a.device());
  kernels_for(a.device()).binary(op, operand(out), operand(a, shape), operand(b, shape), alpha);
  if (kind && should_record({&a, &b})) {
    detail::record(*kind, {a, b}, {out}, binary_attrs(*kind, alpha));
  }
  return out;
}

Tensor& binary_out(const char* name, BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b,
                   double alpha) {
  check_binary(name, a, b);
  TraceOpScope trace(name);
  const Shape shape = result_shape(name, a, b);
  detail::prepare_out(out, shape, binary_result(name, op, a.dtype(), b.dtype()), a.device(), name);
  kernels_for(a.device()).binary(op, operand(out), operand(a, shape), operand(b, shape), alpha);
  out.storage().bump_version();
  return out;
}

// a op= b: b must broadcast to a's shape and the result must fit a's dtype.
Tensor& binary_inplace(const char* name, BinaryOp op, OpKind kind, Tensor& a, const Tensor& b,
                       double alpha) {
  check_binary(name, a, b);
  TraceOpScope trace(name);
  const Shape shape = result_shape(name, a, b);
  if (!(shape == a.sizes())) {
    throw ShapeError(fmt::format("[{}] output with shape {} doesn't match the broadcast shape {}",
                                 name, to_string(a.sizes()), to_string(shape)),
                     name, ShapeRoles::wanted(shape, a.sizes()));
  }
  const DType result = binary_result(name, op, a.dtype(), b.dtype());
  if (is_floating(result) && !is_floating(a.dtype())) {
    throw DTypeError(fmt::format("[{}] result type {} can't be cast to the desired output type {}",
                                 name, dtype_name(result), dtype_name(a.dtype())),
                     name, {result, a.dtype()});
  }
  detail::InplaceRecord rec(kind, a, {b}, binary_attrs(kind, alpha));
  kernels_for(a.device()).binary(op, operand(a), operand(a), operand(b, shape), alpha);
  rec.finish(a);
  return a;
}

Tensor scalar_op(const char* name, BinaryOp op, std::optional<OpKind> kind, const Tensor& a,
                 Scalar s, bool scalar_first) {
  detail::check_defined(name, a, "self");
  TraceOpScope trace(name);
  const std::vector<Tensor> in = kind ? detail::autocast(*kind, {a}) : std::vector<Tensor>{a};
  const Tensor& x = in[0];
  DType dt = kernels::is_comparison(op) ? kBool : scalar_result(x.dtype(), s);
  if (op == BinaryOp::Div) dt = float_result(dt);
  Tensor out = new_tensor(x.sizes(), dt, x.device());
  kernels_for(x.device()).binary_scalar(op, operand(out), operand(x), s.to_double(), scalar_first);
  if (kind && should_record({&x})) {
    detail::record(*kind, {x}, {out}, ScalarAttrs{s.to_double(), scalar_first});
  }
  return out;
}

Tensor& scalar_inplace(const char* name, BinaryOp op, OpKind kind, Tensor& a, Scalar s) {
  detail::check_defined(name, a, "self");
  TraceOpScope trace(name);
  DType dt = scalar_result(a.dtype(), s);
  if (op == BinaryOp::Div) dt = float_result(dt);
  if (is_floating(dt) && !is_floating(a.dtype())) {
    throw DTypeError(fmt::format("[{}] result type {} can't be cast to the desired output type {}",
                                 name, dtype_name(dt), dtype_name(a.dtype())),
                     name, {dt, a.dtype()});
  }
  detail::InplaceRecord rec(kind, a, {}, ScalarAttrs{s.to_double(), false});
  kernels_for(a.device()).binary_scalar(op, operand(a), operand(a), s.to_double(), false);
  rec.finish(a);
  return a;
}

// Ops whose result is floating even for integer inputs (exp, log, ...).
bool needs_float(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Abs:
    case UnaryOp::Sign:
    case UnaryOp::Relu:
    case UnaryOp::Square:
    case UnaryOp::LogicalNot: return false;
    default: return true;
  }
}

DType unary_result(UnaryOp op, DType in) {
  if (op == UnaryOp::LogicalNot) return kBool;
  return needs_float(op) ? float_result(in) : in;
}

// gelu carries which formula it computes; the other unary ops need nothing.
OpAttrs unary_attrs(UnaryOp op) {
  if (op == UnaryOp::GeluTanh || op == UnaryOp::GeluErf) {
    return GeluAttrs{op == UnaryOp::GeluTanh};
  }
  return NoAttrs{};
}

Tensor unary_op(const char* name, UnaryOp op, std::optional<OpKind> kind, const Tensor& input) {
  detail::check_defined(name, input);
  TraceOpScope trace(name);
  const std::vector<Tensor> in =
      kind ? detail::autocast(*kind, {input}) : std::vector<Tensor>{input};
  const Tensor& x = in[0];
  if (op == UnaryOp::Neg && x.dtype() == kBool) {
    throw DTypeError(fmt::format("[{}] negation of a bool tensor is not supported; use "
                                 "logical_not instead",
                                 name),
                     name, {x.dtype()});
  }
  Tensor out = new_tensor(x.sizes(), unary_result(op, x.dtype()), x.device());
  kernels_for(x.device()).unary(op, operand(out), operand(x));
  if (kind && should_record({&x})) detail::record(*kind, {x}, {out}, unary_attrs(op));
  return out;
}

Tensor& unary_out(const char* name, UnaryOp op, Tensor& out, const Tensor& x) {
  detail::check_defined(name, x);
  TraceOpScope trace(name);
  detail::prepare_out(out, x.sizes(), unary_result(op, x.dtype()), x.device(), name);
  kernels_for(x.device()).unary(op, operand(out), operand(x));
  out.storage().bump_version();
  return out;
}

Tensor& unary_inplace(const char* name, UnaryOp op, OpKind kind, Tensor& x) {
  detail::check_defined(name, x);
  TraceOpScope trace(name);
  if (unary_result(op, x.dtype()) != x.dtype()) {
    throw DTypeError(
        fmt::format("[{}] result type {} can't be cast to the desired output type {}", name,
                    dtype_name(unary_result(op, x.dtype())), dtype_name(x.dtype())),
        name, {unary_result(op, x.dtype()), x.dtype()});
  }
  detail::InplaceRecord rec(kind, x, {}, unary_attrs(op));
  kernels_for(x.device()).unary(op, operand(x), operand(x));
  rec.finish(x);
  return x;
}

ClampAttrs clamp_attrs(const char* name, std::optional<Scalar> min, std::optional<Scalar> max) {
  if (!min && !max) {
    throw ValueError(fmt::format("[{}] at least one of 'min' or 'max' must be given", name), name,
                     "min, max");
  }
  ClampAttrs attrs;
  if (min) attrs.min = min->to_double();
  if (max) attrs.max = max->to_double();
  return attrs;
}

}  // namespace

// ---- binary ----

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return binary_op("add", BinaryOp::Add, OpKind::Add, a, b, alpha.to_double());
}
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  return binary_op("sub", BinaryOp::Sub, OpKind::Sub, a, b, alpha.to_double());
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op("mul", BinaryOp::Mul, OpKind::Mul, a, b, 1.0);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary_op("div", BinaryOp::Div, OpKind::Div, a, b, 1.0);
}
Tensor pow(const Tensor& a, const Tensor& exponent) {
  return binary_op("pow", BinaryOp::Pow, OpKind::Pow, a, exponent, 1.0);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op("maximum", BinaryOp::Maximum, OpKind::Maximum, a, b, 1.0);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op("minimum", BinaryOp::Minimum, OpKind::Minimum, a, b, 1.0);
}
Tensor add(const Tensor& a, Scalar b) {
  return scalar_op("add", BinaryOp::Add, OpKind::AddScalar, a, b, false);
}
Tensor mul(const Tensor& a, Scalar b) {
  return scalar_op("mul", BinaryOp::Mul, OpKind::MulScalar, a, b, false);
}
Tensor div(const Tensor& a, Scalar b) {
  return scalar_op("div", BinaryOp::Div, OpKind::DivScalar, a, b, false);
}
Tensor pow(const Tensor& a, Scalar exponent) {
  return scalar_op("pow", BinaryOp::Pow, OpKind::PowScalar, a, exponent, false);
}
Tensor rsub(const Tensor& a, Scalar b) {
  return scalar_op("rsub", BinaryOp::Sub, OpKind::RSubScalar, a, b, true);
}
Tensor rdiv(const Tensor& a, Scalar b) {
  return scalar_op("div", BinaryOp::Div, OpKind::DivScalar, a, b, true);
}

Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  return binary_out("add", BinaryOp::Add, out, a, b, alpha.to_double());
}
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  return binary_out("sub", BinaryOp::Sub, out, a, b, alpha.to_double());
}
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b) {
  return binary_out("mul", BinaryOp::Mul, out, a, b, 1.0);
}
Tensor& mul_out(Tensor& out, const Tensor& a, Scalar b) {
  detail::check_defined("mul", a, "self");
  TraceOpScope trace("mul");
  detail::prepare_out(out, a.sizes(), scalar_result(a.dtype(), b), a.device(), "mul");
  kernels_for(a.device())
      .binary_scalar(BinaryOp::Mul, operand(out), operand(a), b.to_double(), false);
  out.storage().bump_version();
  return out;
}
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b) {
  return binary_out("div", BinaryOp::Div, out, a, b, 1.0);
}

// ---- unary ----

Tensor neg(const Tensor& x) { return unary_op("neg", UnaryOp::Neg, OpKind::Neg, x); }
Tensor exp(const Tensor& x) { return unary_op("exp", UnaryOp::Exp, OpKind::Exp, x); }
Tensor log(const Tensor& x) { return unary_op("log", UnaryOp::Log, OpKind::Log, x); }
Tensor sqrt(const Tensor& x) { return unary_op("sqrt", UnaryOp::Sqrt, OpKind::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary_op("rsqrt", UnaryOp::Rsqrt, OpKind::Rsqrt, x); }
Tensor abs(const Tensor& x) { return unary_op("abs", UnaryOp::Abs, OpKind::Abs, x); }
Tensor sign(const Tensor& x) { return unary_op("sign", UnaryOp::Sign, OpKind::Sign, x); }
Tensor tanh(const Tensor& x) { return unary_op("tanh", UnaryOp::Tanh, OpKind::Tanh, x); }
Tensor sigmoid(const Tensor& x) {
  return unary_op("sigmoid", UnaryOp::Sigmoid, OpKind::Sigmoid, x);
}
Tensor relu(const Tensor& x) { return unary_op("relu", UnaryOp::Relu, OpKind::Relu, x); }
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  return unary_op("gelu", tanh_approximation ? UnaryOp::GeluTanh : UnaryOp::GeluErf, OpKind::Gelu,
                  x);
}
Tensor silu(const Tensor& x) { return unary_op("silu", UnaryOp::Silu, OpKind::Silu, x); }
Tensor reciprocal(const Tensor& x) {
  return unary_op("reciprocal", UnaryOp::Reciprocal, OpKind::Reciprocal, x);
}
Tensor square(const Tensor& x) { return unary_op("square", UnaryOp::Square, OpKind::Square, x); }
Tensor logical_not(const Tensor& x) {
  return unary_op("logical_not", UnaryOp::LogicalNot, kNotDifferentiable, x);
}

Tensor& exp_out(Tensor& out, const Tensor& x) { return unary_out("exp", UnaryOp::Exp, out, x); }
Tensor& relu_out(Tensor& out, const Tensor& x) { return unary_out("relu", UnaryOp::Relu, out, x); }
Tensor& tanh_out(Tensor& out, const Tensor& x) { return unary_out("tanh", UnaryOp::Tanh, out, x); }
Tensor& sigmoid_out(Tensor& out, const Tensor& x) {
  return unary_out("sigmoid", UnaryOp::Sigmoid, out, x);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  detail::check_defined("clamp", x);
  TraceOpScope trace("clamp");
  const ClampAttrs attrs = clamp_attrs("clamp", min, max);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  kernels_for(x.device())
      .clamp(operand(out), operand(x), attrs.min.value_or(0.0), attrs.max.value_or(0.0),
             attrs.min.has_value(), attrs.max.has_value());
  if (should_record({&x})) detail::record(OpKind::Clamp, {x}, {out}, attrs);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_binary("where", a, b);
  detail::check_defined("where", cond, "condition");
  detail::check_same_device("where", cond, a);
  if (cond.dtype() != kBool) {
    throw DTypeError(
        fmt::format("[where] condition must be a bool tensor, got {}", dtype_name(cond.dtype())),
        "where", {cond.dtype()});
  }
  TraceOpScope trace("where");
  const Shape shape =
      broadcast_shapes(cond.sizes(), broadcast_shapes(a.sizes(), b.sizes(), "where"), "where");
  Tensor out = new_tensor(shape, promote_types(a.dtype(), b.dtype()), a.device());
  kernels_for(a.device())
      .where(operand(out), operand(cond, shape), operand(a, shape), operand(b, shape));
  if (should_record({&a, &b})) detail::record(OpKind::Where, {cond, a, b}, {out});
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  return where(cond, a, full({}, b, TensorOptions(a.dtype()).with_device(a.device())));
}

// ---- comparisons ----

Tensor eq(const Tensor& a, const Tensor& b) {
  return binary_op("eq", BinaryOp::Eq, kNotDifferentiable, a, b, 1);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary_op("ne", BinaryOp::Ne, kNotDifferentiable, a, b, 1);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary_op("lt", BinaryOp::Lt, kNotDifferentiable, a, b, 1);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary_op("le", BinaryOp::Le, kNotDifferentiable, a, b, 1);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary_op("gt", BinaryOp::Gt, kNotDifferentiable, a, b, 1);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary_op("ge", BinaryOp::Ge, kNotDifferentiable, a, b, 1);
}
Tensor eq(const Tensor& a, Scalar b) {
  return scalar_op("eq", BinaryOp::Eq, kNotDifferentiable, a, b, false);
}
Tensor ne(const Tensor& a, Scalar b) {
  return scalar_op("ne", BinaryOp::Ne, kNotDifferentiable, a, b, false);
}
Tensor lt(const Tensor& a, Scalar b) {
  return scalar_op("lt", BinaryOp::Lt, kNotDifferentiable, a, b, false);
}
Tensor le(const Tensor& a, Scalar b) {
  return scalar_op("le", BinaryOp::Le, kNotDifferentiable, a, b, false);
}
Tensor gt(const Tensor& a, Scalar b) {
  return scalar_op("gt", BinaryOp::Gt, kNotDifferentiable, a, b, false);
}
Tensor ge(const Tensor& a, Scalar b) {
  return scalar_op("ge", BinaryOp::Ge, kNotDifferentiable, a, b, false);
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_op("logical_and", BinaryOp::LogicalAnd, kNotDifferentiable, a, b, 1);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_op("logical_or", BinaryOp::LogicalOr, kNotDifferentiable, a, b, 1);
}

namespace {

// A new float64 tensor with x's values (never x itself).
Tensor float64_copy(const Tensor& x) { return x.dtype() == kFloat64 ? x.clone() : x.to(kFloat64); }

}  // namespace

bool equal(const Tensor& a, const Tensor& b) {
  if (!(a.sizes() == b.sizes())) return false;
  if (a.numel() == 0) return true;
  return all(eq(a, b)).item<bool>();
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!(a.sizes() == b.sizes())) return false;
  if (a.numel() == 0) return true;
  GradModeGuard no_grad(false);
  // Two float64 buffers, each updated in place: |a - b| and atol + rtol |b|.
  Tensor diff = float64_copy(a);
  diff.sub_(b).abs_();
  Tensor bound = float64_copy(b);
  bound.abs_().mul_(rtol).add_(atol);
  return all(le(diff, bound)).item<bool>();
}

// ---- in place ----

Tensor& add_(Tensor& self, const Tensor& other, Scalar alpha) {
  return binary_inplace("add_", BinaryOp::Add, OpKind::Add, self, other, alpha.to_double());
}
Tensor& add_(Tensor& self, Scalar other) {
  return scalar_inplace("add_", BinaryOp::Add, OpKind::AddScalar, self, other);
}
Tensor& sub_(Tensor& self, const Tensor& other, Scalar alpha) {
  return binary_inplace("sub_", BinaryOp::Sub, OpKind::Sub, self, other, alpha.to_double());
}
Tensor& sub_(Tensor& self, Scalar other) {
  return scalar_inplace("sub_", BinaryOp::Add, OpKind::AddScalar, self, other.negated());
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  return binary_inplace("mul_", BinaryOp::Mul, OpKind::Mul, self, other, 1.0);
}
Tensor& mul_(Tensor& self, Scalar other) {
  return scalar_inplace("mul_", BinaryOp::Mul, OpKind::MulScalar, self, other);
}
Tensor& div_(Tensor& self, const Tensor& other) {
  return binary_inplace("div_", BinaryOp::Div, OpKind::Div, self, other, 1.0);
}
Tensor& div_(Tensor& self, Scalar other) {
  return scalar_inplace("div_", BinaryOp::Div, OpKind::DivScalar, self, other);
}
Tensor& pow_(Tensor& self, Scalar exponent) {
  return scalar_inplace("pow_", BinaryOp::Pow, OpKind::PowScalar, self, exponent);
}
Tensor& neg_(Tensor& self) { return unary_inplace("neg_", UnaryOp::Neg, OpKind::Neg, self); }
Tensor& exp_(Tensor& self) { return unary_inplace("exp_", UnaryOp::Exp, OpKind::Exp, self); }
Tensor& log_(Tensor& self) { return unary_inplace("log_", UnaryOp::Log, OpKind::Log, self); }
Tensor& sqrt_(Tensor& self) { return unary_inplace("sqrt_", UnaryOp::Sqrt, OpKind::Sqrt, self); }
Tensor& rsqrt_(Tensor& self) {
  return unary_inplace("rsqrt_", UnaryOp::Rsqrt, OpKind::Rsqrt, self);
}
Tensor& abs_(Tensor& self) { return unary_inplace("abs_", UnaryOp::Abs, OpKind::Abs, self); }
Tensor& tanh_(Tensor& self) { return unary_inplace("tanh_", UnaryOp::Tanh, OpKind::Tanh, self); }
Tensor& sigmoid_(Tensor& self) {
  return unary_inplace("sigmoid_", UnaryOp::Sigmoid, OpKind::Sigmoid, self);
}
Tensor& relu_(Tensor& self) { return unary_inplace("relu_", UnaryOp::Relu, OpKind::Relu, self); }
Tensor& silu_(Tensor& self) { return unary_inplace("silu_", UnaryOp::Silu, OpKind::Silu, self); }
Tensor& reciprocal_(Tensor& self) {
  return unary_inplace("reciprocal_", UnaryOp::Reciprocal, OpKind::Reciprocal, self);
}
Tensor& clamp_(Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  detail::check_defined("clamp_", self);
  TraceOpScope trace("clamp_");
  const ClampAttrs attrs = clamp_attrs("clamp_", min, max);
  detail::InplaceRecord rec(OpKind::Clamp, self, {}, attrs);
  kernels_for(self.device())
      .clamp(operand(self), operand(self), attrs.min.value_or(0.0), attrs.max.value_or(0.0),
             attrs.min.has_value(), attrs.max.has_value());
  rec.finish(self);
  return self;
}

}  // namespace memgrad
