// Matrix products on Eigen/OpenBLAS GEMM (CPU) and cuBLAS (CUDA).
//
// Memory contract for the family:
//   Allocates: the result only. Transposed operands (a .t() or .mT() view) are passed to GEMM
//              as transposes, not copied; other non-contiguous operands are copied to a
//              contiguous temporary first (freed before return).
//   Aliases:   nothing. Version: unchanged (the _out forms write into out).
//   Saves for backward (each operand only when the other one's gradient reads it):
//     mm, bmm, matmul: self if other requires grad, other if self requires grad
//     addmm: a if b requires grad, b if a requires grad (never the bias)
//     linear: the input if the weight requires grad, the weight if the input requires grad
//     (never the bias)
// Errors: ShapeError naming both shapes and the mismatching sizes.
#pragma once

#include "engine/scalar.h"
#include "engine/tensor.h"

namespace memgrad {

// (n, k) @ (k, m) -> (n, m).
Tensor mm(const Tensor& a, const Tensor& b);
// (B, n, k) @ (B, k, m) -> (B, n, m).
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.matmul: 1-d/2-d/batched with broadcasting of the batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
// beta bias + alpha (a @ b); bias broadcasts to (n, m).
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta = 1,
             Scalar alpha = 1);
// x @ weight^T + bias, for x of shape (..., in) and weight (out, in).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace memgrad
