// CUDA GEMM through cuBLAS: C = alpha A @ B + beta C, single or strided-batched.
//
// cuBLAS is column-major and our operands are row-major views, so the product is computed as
// C^T = B^T A^T: a row-major (rows x cols) matrix with leading dimension ld is, read
// column-major, its transpose with the same ld. Each MatrixArg is either row-major (col_stride
// 1: no transpose for cuBLAS) or a transpose of one (row_stride 1: CUBLAS_OP_T), with ld at
// least the row (column) length; anything else raises GemmLayoutError (the engine makes such
// operands contiguous first, see engine/linalg.cpp). The 64-bit cuBLAS entry points take every
// extent and stride as int64.
//
// Types: float32 computes in float32 (CUBLAS_COMPUTE_32F; TF32 tensor cores only when
// allow_tf32() is set, as torch.backends.cuda.matmul.allow_tf32, off by default); float16
// multiplies on tensor cores with float32 accumulation (CUBLAS_COMPUTE_32F with 16F operands);
// float64 in float64. k == 0 scales C by beta (beta == 0 writes zeros) without cuBLAS.
//
// Memory: the workspace cuBLAS uses comes once per stream from the device's allocator (see
// BlasSession in device_context.cpp), so it shows in memory_allocated(); nothing else is
// allocated here.
#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_handles.h"

namespace memgrad::kernels::cuda {
namespace {

// One operand as cuBLAS reads it (in the C^T = B^T A^T formulation).
struct BlasOperand {
  const void* data = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// The cuBLAS view of a rows x cols row-major MatrixArg, the rule of kernels/cpu/gemm.cpp's
// blas_layout: size-1 dims may carry any stride.
BlasOperand blas_operand(const MatrixArg& m, int64_t rows, int64_t cols, const char* name) {
  BlasOperand b;
  b.data = m.data;
  b.batch_stride = m.batch_stride;
  if (m.col_stride == 1 || cols == 1) {
    b.op = CUBLAS_OP_N;
    b.ld = rows == 1 ? std::max<int64_t>(1, cols) : m.row_stride;
    if (b.ld >= std::max<int64_t>(1, cols)) return b;
  }
  if (m.row_stride == 1 || rows == 1) {
    b.op = CUBLAS_OP_T;
    b.ld = cols == 1 ? std::max<int64_t>(1, rows) : m.col_stride;
    if (b.ld >= std::max<int64_t>(1, rows)) return b;
  }
  throw GemmLayoutError(
      fmt::format("[gemm] operand {} ({} x {}) has strides ({}, {}) that cuBLAS cannot express: "
                  "one of them must be 1 and the other at least the matching extent; make it "
                  "contiguous first",
                  name, rows, cols, m.row_stride, m.col_stride),
      "gemm", static_cast<int>(CUBLAS_STATUS_INVALID_VALUE));
}

struct BlasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

BlasTypes blas_types(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::Float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case DType::BFloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case DType::Float32:
      return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    default:
      throw CudaError(fmt::format("[gemm] dtype {} has no cuBLAS GEMM (float32, float64, "
                                  "float16 and bfloat16 do)",
                                  static_cast<int>(dtype)),
                      "gemm", static_cast<int>(CUBLAS_STATUS_NOT_SUPPORTED));
  }
}

std::string shapes(const GemmArgs& g) {
  return fmt::format("batch {}, m {}, n {}, k {}, lda/ldb/ldc from strides ({}, {}) ({}, {}) {}",
                     g.batch, g.m, g.n, g.k, g.a.row_stride, g.a.col_stride, g.b.row_stride,
                     g.b.col_stride, g.ldc);
}

}  // namespace

void CudaBackend::gemm(const GemmArgs& args) {
  if (args.batch == 0 || args.outer == 0 || args.m == 0 || args.n == 0) return;
  if (args.outer > 1) {  // one strided-batched call per outer group
    for (int64_t o = 0; o < args.outer; ++o) gemm(gemm_group(args, o));
    return;
  }
  DeviceGuard guard(device_);
  GemmArgs g = args;
  // A one-row C never steps to a second row, but cuBLAS still insists on ldc >= n.
  if (g.m == 1) g.ldc = std::max<int64_t>(g.ldc, g.n);
  Operand c;  // C as an operand: (batch, m, n) with strides (batch_stride_c, ldc, 1)
  c.data = g.c;
  c.dtype = g.dtype;
  c.ndim = 3;
  c.sizes[0] = g.batch, c.sizes[1] = g.m, c.sizes[2] = g.n;
  c.strides[0] = g.batch_stride_c, c.strides[1] = g.ldc, c.strides[2] = 1;
  if (g.k == 0) {
    if (g.beta == 0.0)
      fill(c, 0.0);
    else
      binary_scalar(BinaryOp::Mul, c, c, g.beta, false);
    return;
  }
  const BlasTypes types = blas_types(g.dtype);
  // C^T (n x m) = B^T (n x k) A^T (k x m), column-major.
  const BlasOperand a = blas_operand(g.a, g.m, g.k, "a");
  const BlasOperand b = blas_operand(g.b, g.k, g.n, "b");
  const float alpha_f = static_cast<float>(g.alpha), beta_f = static_cast<float>(g.beta);
  const bool f64 = g.dtype == DType::Float64;
  const void* alpha = f64 ? static_cast<const void*>(&g.alpha) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&g.beta) : &beta_f;
  BlasSession session(device_);
  const bool one = g.batch == 1;
  const cublasStatus_t status =
      one ? cublas_api().gemm_ex(session.handle(), b.op, a.op, g.n, g.m, g.k, alpha, b.data,
                                 types.data, b.ld, a.data, types.data, a.ld, beta, g.c, types.data,
                                 g.ldc, types.compute, CUBLAS_GEMM_DEFAULT)
          : cublas_api().gemm_strided_batched_ex(
                session.handle(), b.op, a.op, g.n, g.m, g.k, alpha, b.data, types.data, b.ld,
                b.batch_stride, a.data, types.data, a.ld, a.batch_stride, beta, g.c, types.data,
                g.ldc, g.batch_stride_c, g.batch, types.compute, CUBLAS_GEMM_DEFAULT);
  // The shapes are formatted for a failure only: a GEMM's host time stays the call's own.
  if (status != CUBLAS_STATUS_SUCCESS) {
    check_cublas(status, one ? "cublasGemmEx_64" : "cublasGemmStridedBatchedEx_64", shapes(g));
  }
}

}  // namespace memgrad::kernels::cuda
