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

#include <array>

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

// The gradients of linear(x, weight, bias) given the output's gradient `grad`, each only where
// `needs` asks (the others undefined): grad @ weight (x's shape; weight needed),
// grad^T @ x over all leading dims (weight's shape; x needed) and grad summed over all leading
// dims (the bias's shape). Results, allocations and their order are those of matmul(grad,
// weight), mm(grad2^T, x2) and grad2.sum({0}) for grad2 and x2 the two reshaped to matrices;
// when both products are wanted and need no copies, they go to the kernels as one pair, which
// the CPU runs side by side, one thread each (kernels/cpu/gemm.cpp): the same results as on one
// thread, bit for bit, whatever the number of threads.
std::array<Tensor, 3> linear_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                      std::array<bool, 3> needs);

Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace memgrad
