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

// C = alpha * A @ B + beta * C, for outer x batch independent (m x k) @ (k x n) products:
// product (o, i) reads A at a.data + o * outer_stride_a + i * a.batch_stride (likewise B and C).
struct GemmArgs {
  DType dtype = DType::Float32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatrixArg a, b;
  void* c = nullptr;
  int64_t ldc = 0;  // row stride of C (its column stride is 1)
  int64_t batch_stride_c = 0;
  double alpha = 1.0, beta = 0.0;
  // A second batch level around `batch`, for two batch dims whose strides do not merge into one
  // (attention's heads inside each sequence). Strides in elements.
  int64_t outer = 1, outer_stride_a = 0, outer_stride_b = 0, outer_stride_c = 0;
};

// The products of outer group `o` of `g` alone (outer 1), for a backend that runs the groups
// one after another.
GemmArgs gemm_group(const GemmArgs& g, int64_t o);

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
  virtual void softmax_backward(const Operand& grad_in, const Operand& grad_out, const Operand& out,
                                int dim, bool log) = 0;

  // ---- matrix products ----
  virtual void gemm(const GemmArgs& args) = 0;
  // Two independent products (neither reads what the other writes), for a backend that can
  // run them at once; by default one after the other.
  virtual void gemm_pair(const GemmArgs& first, const GemmArgs& second) {
    gemm(first);
    gemm(second);
  }

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

  // ---- nn (every operand contiguous) ----
  // Per row of n elements: y = (x - mean) * rstd * weight + bias; mean and rstd (one per row,
  // float32 or the input's dtype if float64) are written too. weight/bias data may be null.
  virtual void layer_norm(const Operand& y, const Operand& mean, const Operand& rstd,
                          const Operand& x, const Operand& weight, const Operand& bias,
                          int64_t rows, int64_t n, double eps) = 0;
  // dx, and (when their data are not null) dweight and dbias, from dy and the forward's saved
  // x, mean, rstd and weight.
  virtual void layer_norm_backward(const Operand& dx, const Operand& dweight, const Operand& dbias,
                                   const Operand& dy, const Operand& x, const Operand& mean,
                                   const Operand& rstd, const Operand& weight, int64_t rows,
                                   int64_t n) = 0;
  // Per row of logits (rows x C): log_probs = log_softmax(row) and
  // loss = -(1 - s) log_probs[target] - (s / C) sum(log_probs); rows whose target equals
  // ignore_index get loss 0. Reports a target outside [0, C) other than ignore_index.
  virtual IndexCheck cross_entropy(const Operand& loss, const Operand& log_probs,
                                   const Operand& logits, const Operand& target,
                                   int64_t ignore_index, double smoothing) = 0;
  // grad_logits = grad_loss[row] * scale * (exp(log_probs) - (1 - s) onehot(target) - s / C),
  // and 0 for ignored rows. grad_loss has one element per row (or one for all: stride 0).
  virtual void cross_entropy_backward(const Operand& grad_logits, const Operand& grad_loss,
                                      const Operand& log_probs, const Operand& target,
                                      int64_t ignore_index, double smoothing, double scale) = 0;

  // ---- optimizers (fused, in place, every operand contiguous and of the param's dtype) ----
  // buf = momentum buf + (1 - dampening) g' (buf = g' on the first step), with
  // g' = grad + weight_decay param; param -= lr (nesterov ? g' + momentum buf : buf).
  // momentum == 0: param -= lr g' and buf is unused.
  virtual void sgd_step(const Operand& param, const Operand& grad, const Operand& momentum_buffer,
                        double lr, double momentum, double dampening, double weight_decay,
                        bool nesterov, bool first_step) = 0;
  // Adam (decoupled = false: L2 weight decay added to the gradient) or AdamW (decoupled: param
  // *= 1 - lr weight_decay), with bias correction for step `step` (1-based).
  virtual void adam_step(const Operand& param, const Operand& grad, const Operand& exp_avg,
                         const Operand& exp_avg_sq, double lr, double beta1, double beta2,
                         double eps, double weight_decay, bool decoupled, int64_t step) = 0;

  // Waits for queued work (no-op on the CPU).
  virtual void synchronize() = 0;
};

// The CPU backend (always present).
KernelBackend& cpu_backend();
// The meta backend: every kernel a no-op, for tensors with shapes and no values (meta:N).
KernelBackend& meta_backend();

}  // namespace memgrad::kernels
