// The CUDA backend: KernelBackend on one GPU's memory, one op family per file (elementwise.cu,
// copy.cu, reduce.cu, softmax.cu, index.cu, random.cu, nn.cu, optim.cu, gemm.cpp).
//
// This header is CUDA-free (the engine includes it without nvcc's headers). Every entry point
// makes its device current, launches on the device's current stream (device_context.h) and
// returns without waiting, except where a result must reach the host: index kernels wait for
// their bounds check (IndexCheck), and synchronize() waits for everything. Float16 is stored as
// __half and computed in float; reductions accumulate floating sums in double, as the CPU
// backend does. Nothing is taken from the device allocators inside a kernel call, except the
// cuBLAS workspace, which comes once per stream from the allocator the engine installed
// (set_workspace_allocator in device_context.h) and then stays (see gemm.cpp).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/backend.h"

namespace memgrad::kernels::cuda {

// What a program may want to know about a GPU (cudaGetDeviceProperties).
struct DeviceProperties {
  std::string name;         // e.g. "NVIDIA H100 80GB HBM3"
  size_t total_memory = 0;  // bytes
  int multi_processor_count = 0;
  int major = 0, minor = 0;  // compute capability (9.0 for Hopper)
  size_t l2_cache_bytes = 0;
};

// Number of CUDA devices (0 without a driver or a GPU; never throws).
int device_count();

// The properties of cuda:`device` (read once). Throws CudaError for a device that is not there.
const DeviceProperties& device_properties(int device);

// The backend computing on cuda:`device`, created on first use. The caller checks the index.
KernelBackend& backend(int device);

// Waits for all work queued on cuda:`device` (every stream).
void synchronize(int device);

class CudaBackend final : public KernelBackend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  const char* name() const override { return "cuda"; }
  int device() const { return device_; }

  // elementwise.cu
  void unary(UnaryOp op, const Operand& out, const Operand& in) override;
  void unary_backward(UnaryOp op, const Operand& grad_in, const Operand& grad_out,
                      const Operand& saved) override;
  void binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
              double alpha) override;
  void binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                     bool scalar_first) override;
  void pow_scalar_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x,
                           double exponent) override;
  void clamp(const Operand& out, const Operand& in, double min, double max, bool has_min,
             bool has_max) override;
  void clamp_backward(const Operand& grad_in, const Operand& grad_out, const Operand& x, double min,
                      double max, bool has_min, bool has_max) override;
  void where(const Operand& out, const Operand& cond, const Operand& a, const Operand& b) override;

  // copy.cu
  void fill(const Operand& out, double value) override;
  void copy(const Operand& dst, const Operand& src) override;

  // reduce.cu
  void reduce(ReduceOp op, const Operand& out, const Operand& in) override;
  void var(const Operand& out, const Operand& in, int64_t correction, bool take_sqrt) override;
  void arg_reduce(bool is_max, const Operand& values, const Operand& indices, const Operand& in,
                  int dim) override;
  void logsumexp(const Operand& out, const Operand& in) override;
  void norm(const Operand& out, const Operand& in, double p) override;

  // softmax.cu
  void softmax(const Operand& out, const Operand& in, int dim, bool log) override;
  void softmax_backward(const Operand& grad_in, const Operand& grad_out, const Operand& out,
                        int dim, bool log) override;

  // gemm.cpp
  void gemm(const GemmArgs& args) override;

  // index.cu
  IndexCheck index_select(const Operand& out, const Operand& in, const Operand& index,
                          int dim) override;
  IndexCheck gather(const Operand& out, const Operand& in, const Operand& index, int dim) override;
  IndexCheck scatter_add(const Operand& self, const Operand& index, const Operand& src,
                         int dim) override;
  IndexCheck index_add(const Operand& self, const Operand& index, const Operand& src,
                       int dim) override;
  void masked_fill(const Operand& self, const Operand& mask, double value) override;
  IndexCheck one_hot(const Operand& out, const Operand& labels) override;

  // random.cu
  void uniform(const Operand& out, uint64_t seed, uint64_t offset, double from, double to) override;
  void normal(const Operand& out, uint64_t seed, uint64_t offset, double mean, double std) override;
  void randint(const Operand& out, uint64_t seed, uint64_t offset, int64_t low,
               int64_t high) override;
  void bernoulli(const Operand& out, uint64_t seed, uint64_t offset, double p) override;

  // nn.cu
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

  // optim.cu
  void sgd_step(const Operand& param, const Operand& grad, const Operand& momentum_buffer,
                double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                bool first_step) override;
  void adam_step(const Operand& param, const Operand& grad, const Operand& exp_avg,
                 const Operand& exp_avg_sq, double lr, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled, int64_t step) override;

  // cuda_backend.cpp: waits for every stream of the device.
  void synchronize() override;

 private:
  int device_;
};

}  // namespace memgrad::kernels::cuda
