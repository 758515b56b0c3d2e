// The CPU backend: KernelBackend on host memory, one op family per .cpp file (the elementwise
// ops in unary.cpp, unary_backward.cpp, binary.cpp and compare.cpp, which share their loops in
// elementwise_rows.h; reduce.cpp, softmax.cpp, gemm.cpp, index.cpp, copy.cpp, random.cpp, ...).
// Loops are OpenMP-parallel above kParallelThreshold elements; contiguous float loops use
// Eigen's vectorised math. Float16 is stored as Eigen::half and computed in float.
#pragma once

#include "kernels/backend.h"

namespace memgrad::kernels::cpu {

class CpuBackend final : public KernelBackend {
 public:
  const char* name() const override { return "cpu"; }

  // unary.cpp
  void unary(UnaryOp op, const Operand& out, const Operand& in) override;
  void clamp(const Operand& out, const Operand& in, double min, double max, bool has_min,
             bool has_max) override;
  void where(const Operand& out, const Operand& cond, const Operand& a, const Operand& b) override;
  // unary_backward.cpp
  void unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                      const Operand& saved) override;
  void pow_scalar_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x,
                           double exponent) override;
  void clamp_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x, double min,
                      double max, bool has_min, bool has_max) override;
  // binary.cpp (comparisons: compare.cpp)
  void binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
              double alpha) override;
  void binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                     bool scalar_first) override;

  // copy.cpp
  void fill(const Operand& out, double value) override;
  void copy(const Operand& dst, const Operand& src) override;

  // reduce.cpp
  void reduce(ReduceOp op, const Operand& out, const Operand& in) override;
  void var(const Operand& out, const Operand& in, int64_t correction, bool take_sqrt) override;
  void arg_reduce(bool is_max, const Operand& values, const Operand& indices, const Operand& in,
                  int dim) override;
  void logsumexp(const Operand& out, const Operand& in) override;
  void norm(const Operand& out, const Operand& in, double p) override;

  // softmax.cpp
  void softmax(const Operand& out, const Operand& in, int dim, bool log) override;
  void softmax_backward(const Operand& grad_in, const Operand& grad_out, const Operand& out,
                        int dim, bool log) override;

  // gemm.cpp
  void gemm(const GemmArgs& args) override;
  void gemm_pair(const GemmArgs& first, const GemmArgs& second) override;

  // index.cpp
  IndexCheck index_select(const Operand& out, const Operand& in, const Operand& index,
                          int dim) override;
  IndexCheck gather(const Operand& out, const Operand& in, const Operand& index, int dim) override;
  IndexCheck scatter_add(const Operand& self, const Operand& index, const Operand& src,
                         int dim) override;
  IndexCheck index_add(const Operand& self, const Operand& index, const Operand& src,
                       int dim) override;
  void masked_fill(const Operand& self, const Operand& mask, double value) override;
  IndexCheck one_hot(const Operand& out, const Operand& labels) override;

  // random.cpp
  void uniform(const Operand& out, uint64_t seed, uint64_t offset, double from, double to) override;
  void normal(const Operand& out, uint64_t seed, uint64_t offset, double mean, double std) override;
  void randint(const Operand& out, uint64_t seed, uint64_t offset, int64_t low,
               int64_t high) override;
  void bernoulli(const Operand& out, uint64_t seed, uint64_t offset, double p) override;

  // nn.cpp
  void layer_norm(const Operand& y, const Operand& mean, const Operand& rstd, const Operand& x,
                  const Operand& weight, const Operand& bias, int64_t rows, int64_t n,
                  double eps) override;
  void layer_norm_backward(const Operand& dx, const Operand& dweight, const Operand& dbias,
                           const Operand& dy, const Operand& x, const Operand& mean,
                           const Operand& rstd, const Operand& weight, int64_t rows,
                           int64_t n) override;
  IndexCheck cross_entropy(const Operand& loss, const Operand& log_probs, const Operand& logits,
                           const Operand& target, int64_t ignore_index, double smoothing) override;
  void cross_entropy_backward(const Operand& grad_logits, const Operand& grad_loss,
                              const Operand& log_probs, const Operand& target, int64_t ignore_index,
                              double smoothing, double scale) override;

  // optim.cpp
  void sgd_step(const Operand& param, const Operand& grad, const Operand& momentum_buffer,
                double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                bool first_step) override;
  void adam_step(const Operand& param, const Operand& grad, const Operand& exp_avg,
                 const Operand& exp_avg_sq, double lr, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled, int64_t step) override;

  void synchronize() override {}
};

}  // namespace memgrad::kernels::cpu
