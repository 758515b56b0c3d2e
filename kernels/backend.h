// The kernel backend interface: every compute entry point the engine calls, once.
//
// A backend (cpu, cuda) implements all of them on raw Operands; the engine picks the backend of
// a tensor's device and never branches on the device itself. Kernels write only into the
// operands they are given (`out`, `grad_in`, or `self` for in-place ones) and allocate nothing
// from the device allocators (GEMM workspaces included: cuBLAS's is handed in by the engine).
//
// Operand conventions shared by all backends:
//   - elementwise: every operand already has the output's sizes (broadcast inputs carry stride
//     0); operands may have different dtypes, computed in the promoted type (float for float16);
//   - reductions: `out` has the input's ndim with size 1 (and stride 0) along reduced dims;
//   - index kernels report the first out-of-range index instead of throwing (IndexCheck), so
//     the engine can raise a typed error with the op's context.
#pragma once

#include <cstdint>

#include "kernels/kernel_args.h"

namespace memgrad::kernels {

// One matrix operand of a (batched) GEMM, row-major view: element (i, j) of batch b is at
// data + b*batch_stride + i*row_stride + j*col_stride (in elements). A backend handles
// col_stride == 1 (row-major) and row_stride == 1 (a transpose) without copying.
struct MatrixArg {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 1;
  int64_t batch_stride = 0;  // 0: the same matrix for every batch
};

// C = alpha * A @ B + beta * C, for `batch` independent (m x k) @ (k x n) products.
struct GemmArgs {
  DType dtype = DType::Float32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatrixArg a, b;
  void* c = nullptr;
  int64_t ldc = 0;             // row stride of C (its column stride is 1)
  int64_t batch_stride_c = 0;
  double alpha = 1.0, beta = 0.0;
};

// The outcome of an index kernel: ok, or the first offending index value and its position.
struct IndexCheck {
  bool ok = true;
  int64_t value = 0;     // the bad index
  int64_t position = 0;  // its flat position in the index tensor
};

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual const char* name() const = 0;

  // ---- elementwise ----
  virtual void unary(UnaryOp op, const Operand& out, const Operand& in) = 0;
  // grad_in = grad_out * f'(x). `saved` is the op's output for Exp, Tanh, Sigmoid, Relu, Sqrt,
  // Rsqrt and Reciprocal, and its input for the others (PyTorch's choice, see elementwise.h).
  virtual void unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                              const Operand& saved) = 0;
  // out = a op b; `alpha` scales b for Add and Sub.
  virtual void binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
                      double alpha) = 0;
  // out = a op s, or s op a when scalar_first.
  virtual void binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                             bool scalar_first) = 0;
  // grad_in = grad_out * e x^(e-1) (x ^ e with a scalar exponent e).
  virtual void pow_scalar_backward(const Operand& grad_in, const Operand& grad_out,
                                   const Operand& x, double exponent) = 0;
  virtual void clamp(const Operand& out, const Operand& in, double min, double max, bool has_min,
                     bool has_max) = 0;
  // grad_in = grad_out where min <= x <= max, else 0.
  virtual void clamp_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x,
                              double min, double max, bool has_min, bool has_max) = 0;
  virtual void where(const Operand& out, const Operand& cond, const Operand& a,
                     const Operand& b) = 0;
  virtual void fill(const Operand& out, double value) = 0;
  // dst = src converted to dst's dtype (src broadcast to dst's sizes). Both on this backend's
  // memory (host for cpu).
  virtual void copy(const Operand& dst, const Operand& src) = 0;

  // ---- reductions ----
  virtual void reduce(ReduceOp op, const Operand& out, const Operand& in) = 0;
  // Variance (or its square root) with divisor N - correction.
  virtual void var(const Operand& out, const Operand& in, int64_t correction, bool take_sqrt) = 0;
  // Max/min along `dim` with the first index among ties. `values.data` may be null.
  virtual void arg_reduce(bool is_max, const Operand& values, const Operand& indices,
                          const Operand& in, int dim) = 0;
  virtual void logsumexp(const Operand& out, const Operand& in) = 0;
  virtual void norm(const Operand& out, const Operand& in, double p) = 0;
  virtual void softmax(const Operand& out, const Operand& in, int dim, bool log) = 0;
  // grad_in = y (g - sum(g y)) for softmax, g - exp(y) sum(g) for log_softmax, along dim.
  virtual void softmax_backward(const Operand& grad_in, const Operand& grad_out,
                                const Operand& out, int dim, bool log) = 0;

  // ---- matrix products ----
  virtual void gemm(const GemmArgs& args) = 0;

  // ---- indexing ----
  virtual IndexCheck index_select(const Operand& out, const Operand& in, const Operand& index,
                                  int dim) = 0;
  virtual IndexCheck gather(const Operand& out, const Operand& in, const Operand& index,
                            int dim) = 0;
  // self[..., index[i], ...] += src[..., i, ...] along dim (scatter_add semantics).
  virtual IndexCheck scatter_add(const Operand& self, const Operand& index, const Operand& src,
                                 int dim) = 0;
  // self.index_select(dim, index) transposed: self[index[i]] += src[i] along dim.
  virtual IndexCheck index_add(const Operand& self, const Operand& index, const Operand& src,
                               int dim) = 0;
  virtual void masked_fill(const Operand& self, const Operand& mask, double value) = 0;
  // out (…, C) int64 = one-hot of labels.
  virtual IndexCheck one_hot(const Operand& out, const Operand& labels) = 0;

  // ---- random (Philox-4x32-10; element i uses counter offset + i / 4, word i % 4) ----
  virtual void uniform(const Operand& out, uint64_t seed, uint64_t offset, double from,
                       double to) = 0;
  virtual void normal(const Operand& out, uint64_t seed, uint64_t offset, double mean,
                      double std) = 0;
  virtual void randint(const Operand& out, uint64_t seed, uint64_t offset, int64_t low,
                       int64_t high) = 0;
  // out = 1 with probability p, else 0 (any dtype).
  virtual void bernoulli(const Operand& out, uint64_t seed, uint64_t offset, double p) = 0;

  // Waits for queued work (no-op on the CPU).
  virtual void synchronize() = 0;
};

// The CPU backend (always present).
KernelBackend& cpu_backend();

}  // namespace memgrad::kernels
