// Elementwise ops: broadcasting, arbitrary strides, mixed dtypes (promoted like PyTorch).
//
// Memory contract for the whole family:
//   out-of-place  Allocates: the broadcast result (numel x result element size).
//   *_out(out, …) Allocates: nothing when `out` already has the result's shape and dtype;
//                 otherwise out is resized (a new storage of the result's size). Never recorded.
//   in-place (_)  Allocates: nothing, except a copy of self where autograd needs the values it
//                 overwrites (below). Version: bumps self's. The result keeps self's dtype and
//                 shape (other must broadcast to self).
//   Aliases:      nothing (in-place ops write into self).
//   Saves for backward (when an input requires grad; PyTorch's derivatives.yaml choices):
//     add, sub, neg, and add/sub/mul/div with a scalar: nothing
//     mul: self if other requires grad, other if self requires grad
//     div: other; self if other requires grad
//     rdiv (s / x): x
//     pow: self and exponent
//     pow with a scalar exponent: self
//     exp, tanh, sigmoid, relu, sqrt, rsqrt, reciprocal: the result
//     log, abs, gelu, silu, square, clamp: self
//     sign: nothing (its gradient is zero)
//     maximum, minimum: both inputs
//     where: the condition
//   In place, where backward reads self's old value, self is copied first (Allocates: self's
//   nbytes, kept until backward runs): log_, abs_, silu_, clamp_ and pow_ with a scalar exponent
//   copy self when self requires grad; mul_ and div_ with a tensor copy self when other requires
//   grad. exp_, tanh_, sigmoid_, relu_, sqrt_, rsqrt_ and reciprocal_ save self's new value: no
//   copy. add_, sub_, neg_ and the scalar forms of mul_ and div_ save nothing.
// Errors: ShapeError (shapes that do not broadcast), DeviceError (inputs on different devices),
// DTypeError (e.g. a float result written in place into an int64 tensor).
#pragma once

#include <optional>

#include "engine/scalar.h"
#include "engine/tensor.h"

namespace memgrad {

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, Scalar exponent);
// b - a and b / a with a scalar on the left.
Tensor rsub(const Tensor& a, Scalar b);
Tensor rdiv(const Tensor& a, Scalar b);

// In place: self op= other, keeping self's dtype and shape (see the family contract). The
// Tensor methods of the same names (x.add_(y)) forward here.
Tensor& add_(Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor& add_(Tensor& self, Scalar other);
Tensor& sub_(Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor& sub_(Tensor& self, Scalar other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, Scalar other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, Scalar other);
Tensor& pow_(Tensor& self, Scalar exponent);

Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor& mul_out(Tensor& out, const Tensor& a, Scalar b);  // one pass: a copy, scaled
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor silu(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor square(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// The unary ops in place (see the family contract); Tensor's methods forward here.
Tensor& neg_(Tensor& self);
Tensor& exp_(Tensor& self);
Tensor& log_(Tensor& self);
Tensor& sqrt_(Tensor& self);
Tensor& rsqrt_(Tensor& self);
Tensor& abs_(Tensor& self);
Tensor& tanh_(Tensor& self);
Tensor& sigmoid_(Tensor& self);
Tensor& relu_(Tensor& self);
Tensor& silu_(Tensor& self);
Tensor& reciprocal_(Tensor& self);
Tensor& clamp_(Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
// The unary ops with an `out` tensor (see the family contract).
Tensor& exp_out(Tensor& out, const Tensor& x);
Tensor& relu_out(Tensor& out, const Tensor& x);
Tensor& tanh_out(Tensor& out, const Tensor& x);
Tensor& sigmoid_out(Tensor& out, const Tensor& x);

// cond ? a : b, broadcasting all three. `cond` must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);

// Comparisons (bool results; never differentiable).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);

// Whether a and b have the same shape and exactly equal values; allclose: whether
// |a - b| <= atol + rtol |b| everywhere (computed in float64). Both return a plain bool and keep
// nothing, but allocate temporaries while they run, all freed before they return: equal a bool
// tensor of numel bytes and a 0-d result; allclose two float64 tensors of numel elements (updated
// in place), a bool tensor of numel bytes and a 0-d result. Different shapes: false, no allocation.
bool equal(const Tensor& a, const Tensor& b);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace memgrad
