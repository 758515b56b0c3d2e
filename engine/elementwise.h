// Elementwise ops: broadcasting, arbitrary strides, mixed dtypes (promoted like PyTorch).
//
// Memory contract for the whole family:
//   out-of-place  Allocates: the broadcast result (numel x result element size).
//   *_out(out, …) Allocates: nothing when `out` already has the result's shape and dtype;
//                 otherwise out is resized (a new storage of the result's size).
//   in-place (_)  Allocates: nothing. Version: bumps self's. The result keeps self's dtype and
//                 shape (other must broadcast to self).
//   Aliases:      nothing (in-place ops write into self).
//   Saves (autograd), as PyTorch's formulas need: add/sub/neg nothing; mul/div both inputs;
//   exp, tanh, sigmoid, relu, sqrt, rsqrt, reciprocal their output; log, abs, gelu, silu,
//   square, pow, clamp their input.
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

// Whether a and b have the same shape and exactly equal values (no allocation visible to the
// caller; returns a plain bool). allclose: |a - b| <= atol + rtol |b| everywhere.
bool equal(const Tensor& a, const Tensor& b);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace memgrad
