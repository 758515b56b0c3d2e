// What a kernel receives: raw operands (pointer, dtype, sizes and strides in elements) and the
// op enums shared by the CPU and CUDA backends.
//
// Kernels never see tensors, storages or autograd state. The engine prepares every operand with
// the iteration shape already applied: broadcast inputs carry stride 0 along expanded
// dimensions, so a kernel walks all operands of an op with one set of sizes.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace memgrad {

// Most dimensions a tensor may have.
inline constexpr int kMaxDims = 8;

}  // namespace memgrad

namespace memgrad::kernels {

// One operand. `data` points at element [0, ..., 0] (storage offset already applied).
struct Operand {
  void* data = nullptr;
  DType dtype = DType::Float32;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements; 0 along broadcast dimensions

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};

// f(x) ops. The comment gives the formula where it is not the name.
enum class UnaryOp : uint8_t {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,  // 1 / sqrt(x)
  Abs,
  Sign,  // -1, 0 or 1
  Tanh,
  Sigmoid,   // 1 / (1 + exp(-x))
  Relu,      // max(x, 0)
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  GeluErf,   // 0.5 x (1 + erf(x / sqrt(2)))
  Silu,      // x sigmoid(x)
  Reciprocal,
  Square,
  LogicalNot,
};

// f(a, b) ops. Comparisons produce bool.
enum class BinaryOp : uint8_t {
  Add,  // a + alpha b
  Sub,  // a - alpha b
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,
};

constexpr bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge || op == BinaryOp::LogicalAnd ||
         op == BinaryOp::LogicalOr;
}

// Reductions over a set of dimensions.
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod, Any, All };

}  // namespace memgrad::kernels
