// The meta backend: every kernel returns at once. A meta tensor has a shape, a dtype, strides
// and a block from its device's allocator, but no values, so there is nothing to compute; what a
// program allocates is decided before any kernel runs (by the engine's ops and the allocator),
// which is why a meta run allocates exactly what a real one does.
//
// Kernels that check values (indices in range, targets of a loss) report every index valid: a
// meta run assumes the data a real run would be given is good.
#include "kernels/backend.h"

namespace memgrad::kernels {
namespace {

class MetaBackend final : public KernelBackend {
 public:
  const char* name() const override { return "meta"; }

  void unary(UnaryOp, const Operand&, const Operand&) override {}
  void unary_backward(UnaryOp, const Operand&, const Operand&, const Operand&) override {}
  void binary(BinaryOp, const Operand&, const Operand&, const Operand&, double) override {}
  void binary_scalar(BinaryOp, const Operand&, const Operand&, double, bool) override {}
  void pow_scalar_backward(const Operand&, const Operand&, const Operand&, double) override {}
  void clamp(const Operand&, const Operand&, double, double, bool, bool) override {}
  void clamp_backward(const Operand&, const Operand&, const Operand&, double, double, bool,
                      bool) override {}
  void where(const Operand&, const Operand&, const Operand&, const Operand&) override {}
  void fill(const Operand&, double) override {}
  void copy(const Operand&, const Operand&) override {}

  void reduce(ReduceOp, const Operand&, const Operand&) override {}
  void var(const Operand&, const Operand&, int64_t, bool) override {}
  void arg_reduce(bool, const Operand&, const Operand&, const Operand&, int) override {}
  void logsumexp(const Operand&, const Operand&) override {}
  void norm(const Operand&, const Operand&, double) override {}
  void softmax(const Operand&, const Operand&, int, bool) override {}
  void softmax_backward(const Operand&, const Operand&, const Operand&, int, bool) override {}

  void gemm(const GemmArgs&) override {}

  IndexCheck index_select(const Operand&, const Operand&, const Operand&, int) override {
    return {};
  }
  IndexCheck gather(const Operand&, const Operand&, const Operand&, int) override { return {}; }
  IndexCheck scatter_add(const Operand&, const Operand&, const Operand&, int) override {
    return {};
  }
  IndexCheck index_add(const Operand&, const Operand&, const Operand&, int) override { return {}; }
  void masked_fill(const Operand&, const Operand&, double) override {}
  IndexCheck one_hot(const Operand&, const Operand&) override { return {}; }

  void uniform(const Operand&, uint64_t, uint64_t, double, double) override {}
  void normal(const Operand&, uint64_t, uint64_t, double, double) override {}
  void randint(const Operand&, uint64_t, uint64_t, int64_t, int64_t) override {}
  void bernoulli(const Operand&, uint64_t, uint64_t, double) override {}

  void layer_norm(const Operand&, const Operand&, const Operand&, const Operand&, const Operand&,
                  const Operand&, int64_t, int64_t, double) override {}
  void layer_norm_backward(const Operand&, const Operand&, const Operand&, const Operand&,
                           const Operand&, const Operand&, const Operand&, const Operand&, int64_t,
                           int64_t) override {}
  IndexCheck cross_entropy(const Operand&, const Operand&, const Operand&, const Operand&, int64_t,
                           double) override {
    return {};
  }
  void cross_entropy_backward(const Operand&, const Operand&, const Operand&, const Operand&,
                              int64_t, double, double) override {}

  void sgd_step(const Operand&, const Operand&, const Operand&, double, double, double, double,
                bool, bool) override {}
  void adam_step(const Operand&, const Operand&, const Operand&, const Operand&, double, double,
                 double, double, double, bool, int64_t) override {}

  void synchronize() override {}
};

}  // namespace

KernelBackend& meta_backend() {
  static MetaBackend backend;
  return backend;
}

}  // namespace memgrad::kernels
