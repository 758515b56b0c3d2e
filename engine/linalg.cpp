// Matrix products front-end: shape and dtype checks, the folding of batch dims into as few GEMM
// calls as their strides allow, and the autograd records.
//
// No op here builds view tensors: every operand reaches the kernel as a MatrixArg (data
// pointer, row/col strides, batch stride), so a transposed operand (a .t() or .mT() view, or
// the weight of linear) costs nothing, and broadcast batch dims are batch strides of 0. Only an
// operand whose last two dims are neither row- nor column-contiguous (a slice with a step, an
// expanded matrix) is copied to a contiguous temporary on the device first; the temporary is
// freed before the op returns.
#include "engine/linalg.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "allocator/trace.h"
#include "engine/error.h"
#include "engine/op_support.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::should_record;

// One GEMM operand (or result): `batch` dims with their strides (already broadcast to the
// product's batch shape, 0 along broadcast dims), then a rows x cols matrix. Strides in
// elements.
struct BatchedMatrix {
  void* data = nullptr;
  Shape batch_strides;
  int64_t rows = 0, cols = 0, rs = 0, cs = 1;
};

// Whether the GEMM kernels read a rows x cols matrix with strides (rs, cs) in place: row-major
// or a transpose, with a leading dimension covering the row (column). Mirrors the CPU
// kernel's rule (kernels/cpu/gemm.cpp), which packs anything else on the host.
bool gemm_ready(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const bool row_major = (cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols));
  const bool col_major = (rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows));
  return row_major || col_major;
}

// The leading `n` sizes of `s`.
Shape leading(const Shape& s, int n) {
  return Shape(std::span<const int64_t>(s.begin(), static_cast<size_t>(std::max(n, 0))));
}

// A contiguous copy of `t` on its device, not recorded for autograd (the op records its own
// inputs). Allocates: t.nbytes().
Tensor packed(const Tensor& t) {
  Tensor out = new_tensor(t.sizes(), t.dtype(), t.device());
  if (t.numel() > 0) kernels_for(t.device()).copy(detail::operand(out), detail::operand(t));
  return out;
}

// `t` itself when its matrix dims (the last two; the only one for 1-d) are GEMM-readable,
// else a contiguous copy.
Tensor gemm_operand(const Tensor& t) {
  if (t.dim() == 1) return t.stride(0) >= 1 || t.size(0) <= 1 ? t : packed(t);
  const int64_t rows = t.size(-2), cols = t.size(-1);
  return gemm_ready(rows, cols, t.stride(-2), t.stride(-1)) ? t : packed(t);
}

// The matrix view of `t`. A 1-d t is a row (as the left operand) or a column (as the right
// one). Batch strides are broadcast to `batch`.
BatchedMatrix as_matrix(const Tensor& t, bool left, const Shape& batch) {
  BatchedMatrix m;
  m.data = t.data_ptr();
  if (t.dim() == 1) {
    m.rows = left ? 1 : t.size(0);
    m.cols = left ? t.size(0) : 1;
    m.rs = left ? t.size(0) : t.stride(0);
    m.cs = left ? t.stride(0) : 1;
    m.batch_strides = Shape::filled(batch.size(), 0);
    return m;
  }
  const int n = t.dim();
  m.rows = t.size(-2);
  m.cols = t.size(-1);
  m.rs = t.stride(-2);
  m.cs = t.stride(-1);
  m.batch_strides =
      broadcast_strides(leading(t.sizes(), n - 2), leading(t.strides(), n - 2), batch);
  return m;
}

// The matrix view of a contiguous result with batch dims `batch` and rows x cols matrices.
BatchedMatrix result_matrix(const Tensor& out, const Shape& batch, int64_t rows, int64_t cols) {
  BatchedMatrix m;
  m.data = out.data_ptr();
  m.rows = rows;
  m.cols = cols;
  m.rs = cols;
  m.batch_strides = contiguous_strides(batch);
  for (int d = 0; d < batch.size(); ++d) m.batch_strides[d] *= rows * cols;
  return m;
}

// One batch dim after merging, with the strides of A, B and C along it.
struct BatchDim {
  int64_t size, sa, sb, sc;
};

// Batch dims with size-1 dims dropped and neighbours merged where all three strides allow.
std::vector<BatchDim> merge_batch(const Shape& batch, const BatchedMatrix& a,
                                  const BatchedMatrix& b, const BatchedMatrix& c) {
  std::vector<BatchDim> dims;
  for (int d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1) continue;
    const BatchDim cur{batch[d], a.batch_strides[d], b.batch_strides[d], c.batch_strides[d]};
    if (!dims.empty()) {
      BatchDim& prev = dims.back();
      if (prev.sa == cur.sa * cur.size && prev.sb == cur.sb * cur.size &&
          prev.sc == cur.sc * cur.size) {
        prev = BatchDim{prev.size * cur.size, cur.sa, cur.sb, cur.sc};
        continue;
      }
    }
    dims.push_back(cur);
  }
  return dims;
}

// When B is shared by every batch and A's batches are evenly spaced rows (x @ W with x of
// shape (B, n, k)), turns the batch into more rows of one larger product.
void fold_batch_into_rows(std::vector<BatchDim>& dims, BatchedMatrix& a, BatchedMatrix& c) {
  if (dims.size() != 1 || dims[0].sb != 0) return;
  const BatchDim& d = dims[0];
  const int64_t a_rs = a.rows == 1 ? d.sa : a.rs;
  const int64_t c_rs = c.rows == 1 ? d.sc : c.rs;
  if (d.sa != a.rows * a_rs || d.sc != c.rows * c_rs) return;
  if (!gemm_ready(a.rows * d.size, a.cols, a_rs, a.cs)) return;
  a.rows *= d.size;
  a.rs = a_rs;
  c.rows *= d.size;
  c.rs = c_rs;
  dims.clear();
}

// C = alpha A B + beta C over the batch shape `batch` (A, B, C already GEMM-readable). The
// innermost merged batch dim becomes the kernel's batch, the next one its outer batch level;
// any further ones loop here.
// The kernel's arguments for one product C = alpha A B + beta C of matrices (no batch).
kernels::GemmArgs matrix_gemm(DType dtype, const BatchedMatrix& a, const BatchedMatrix& b,
                              const BatchedMatrix& c, double alpha, double beta) {
  kernels::GemmArgs g;
  g.dtype = dtype;
  g.m = a.rows;
  g.n = b.cols;
  g.k = a.cols;
  g.a = kernels::MatrixArg{a.data, a.rs, a.cs, 0};
  g.b = kernels::MatrixArg{b.data, b.rs, b.cs, 0};
  g.c = c.data;
  g.ldc = c.rs;
  g.alpha = alpha;
  g.beta = beta;
  return g;
}

void run_gemm(Device device, DType dtype, BatchedMatrix a, const BatchedMatrix& b, BatchedMatrix c,
              const Shape& batch, double alpha, double beta) {
  std::vector<BatchDim> dims = merge_batch(batch, a, b, c);
  fold_batch_into_rows(dims, a, c);
  kernels::GemmArgs g = matrix_gemm(dtype, a, b, c, alpha, beta);
  if (!dims.empty()) {
    const BatchDim& inner = dims.back();
    g.batch = inner.size;
    g.a.batch_stride = inner.sa;
    g.b.batch_stride = inner.sb;
    g.batch_stride_c = inner.sc;
    dims.pop_back();
  }
  if (!dims.empty()) {
    const BatchDim& next = dims.back();
    g.outer = next.size;
    g.outer_stride_a = next.sa;
    g.outer_stride_b = next.sb;
    g.outer_stride_c = next.sc;
    dims.pop_back();
  }
  const int64_t es = static_cast<int64_t>(element_size(dtype));
  int64_t outer = 1;
  for (const BatchDim& d : dims) outer *= d.size;
  kernels::KernelBackend& kernels = kernels_for(device);
  for (int64_t i = 0; i < outer; ++i) {
    int64_t oa = 0, ob = 0, oc = 0, rem = i;
    for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
      const int64_t idx = rem % d->size;
      rem /= d->size;
      oa += idx * d->sa;
      ob += idx * d->sb;
      oc += idx * d->sc;
    }
    kernels::GemmArgs gi = g;
    gi.a.data = static_cast<const char*>(a.data) + oa * es;
    gi.b.data = static_cast<const char*>(b.data) + ob * es;
    gi.c = static_cast<char*>(c.data) + oc * es;
    kernels.gemm(gi);
  }
}

void check_pair(const char* op, const Tensor& a, const Tensor& b, const char* an, const char* bn) {
  detail::check_defined(op, a, an);
  detail::check_defined(op, b, bn);
  detail::check_same_device(op, a, b);
}

// Matrix products need equal floating dtypes (PyTorch's CPU mm has no int64 kernel either).
void check_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw DTypeError(fmt::format("[{}] expected both operands to have the same dtype, but got {} "
                                 "and {}: convert one with .to(dtype)",
                                 op, dtype_name(a.dtype()), dtype_name(b.dtype())),
                     op, {a.dtype(), b.dtype()});
  }
  if (!is_floating(a.dtype())) {
    throw DTypeError(fmt::format("[{}] matrix products need floating-point operands, got {}: "
                                 "convert with .to(float32)",
                                 op, dtype_name(a.dtype())),
                     op, {a.dtype()});
  }
}

void check_matrix(const char* op, const Tensor& t, const char* name) {
  if (t.dim() != 2) {
    throw ShapeError(fmt::format("[{}] {} must be a matrix, got a {}-D tensor of shape {}", op,
                                 name, t.dim(), to_string(t.sizes())),
                     op, ShapeRoles::given(t.sizes()));
  }
}

// PyTorch's wording for a 2-d mismatch: "mat1 and mat2 shapes cannot be multiplied (2x3 and
// 4x5)".
void check_inner_2d(const char* op, int64_t n, int64_t k, int64_t k2, int64_t m) {
  if (k != k2) {
    throw ShapeError(fmt::format("[{}] mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                                 op, n, k, k2, m),
                     op, ShapeRoles::operands(Shape{n, k}, Shape{k2, m}));
  }
}

// The result shape of matmul(a, b) (torch.matmul's rules); sets the broadcast batch shape.
Shape matmul_shape(const char* op, const Tensor& a, const Tensor& b, Shape& batch) {
  if (a.dim() == 0 || b.dim() == 0) {
    throw ShapeError(fmt::format("[{}] both arguments to matmul need to be at least 1D, but "
                                 "they are {}D and {}D",
                                 op, a.dim(), b.dim()),
                     op, ShapeRoles::operands(a.sizes(), b.sizes()));
  }
  const int64_t ka = a.size(-1);
  const int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  if (ka != kb) {
    throw ShapeError(fmt::format("[{}] shapes {} and {} cannot be multiplied ({} != {})", op,
                                 to_string(a.sizes()), to_string(b.sizes()), ka, kb),
                     op, ShapeRoles::operands(a.sizes(), b.sizes()));
  }
  const Shape ba = leading(a.sizes(), a.dim() - 2), bb = leading(b.sizes(), b.dim() - 2);
  for (int i = 1; i <= std::min(ba.size(), bb.size()); ++i) {
    const int64_t sa = ba[ba.size() - i], sb = bb[bb.size() - i];
    if (sa != sb && sa != 1 && sb != 1) {
      throw ShapeError(fmt::format("[{}] batch dims of shapes {} and {} cannot be broadcast: "
                                   "size {} and size {}",
                                   op, to_string(a.sizes()), to_string(b.sizes()), sa, sb),
                       op, ShapeRoles::operands(a.sizes(), b.sizes()));
    }
  }
  batch = broadcast_shapes(ba, bb, op);
  Shape out = batch;
  if (a.dim() > 1) out.push_back(a.size(-2));
  if (b.dim() > 1) out.push_back(b.size(-1));
  return out;
}

// out = a @ b (matmul rules) into a contiguous `out` of the right shape that aliases neither.
void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, const Shape& batch) {
  if (out.numel() == 0) return;
  const Tensor ra = gemm_operand(a);
  const Tensor rb = gemm_operand(b);
  const BatchedMatrix ma = as_matrix(ra, true, batch);
  const BatchedMatrix mb = as_matrix(rb, false, batch);
  run_gemm(out.device(), out.dtype(), ma, mb, result_matrix(out, batch, ma.rows, mb.cols), batch,
           1.0, 0.0);
}

// The row stride that folds x's leading dims (all but the last) into one run of rows, or
// false when their strides do not chain (a permuted batch).
bool fold_rows(const Tensor& x, int64_t& rs) {
  rs = std::max<int64_t>(1, x.size(-1));
  int inner = -1;
  for (int d = x.dim() - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (inner >= 0 && x.stride(d) != x.stride(inner) * x.size(inner)) return false;
    if (inner < 0) rs = x.stride(d);
    inner = d;
  }
  return true;
}

// out (..., out_f) = x (..., in_f) @ w^T + beta out. x's leading dims fold into the rows of one
// product when their strides chain (else x is packed); w^T is w's memory read transposed.
void linear_gemm(const Tensor& out, const Tensor& x, const Tensor& w, double beta) {
  const int64_t in_f = x.size(-1), out_f = w.size(0);
  const int64_t rows = out.numel() / out_f;
  int64_t rs = 0;
  Tensor rx = x;
  if (!fold_rows(x, rs) || !gemm_ready(rows, in_f, rs, x.stride(-1))) {
    rx = packed(x);
    rs = std::max<int64_t>(1, in_f);
  }
  const Tensor rw = gemm_ready(in_f, out_f, w.stride(1), w.stride(0)) ? w : packed(w);
  BatchedMatrix a;
  a.data = rx.data_ptr();
  a.rows = rows;
  a.cols = in_f;
  a.rs = rs;
  a.cs = rx.stride(-1);
  BatchedMatrix b;
  b.data = rw.data_ptr();
  b.rows = in_f;
  b.cols = out_f;
  b.rs = rw.stride(1);
  b.cs = rw.stride(0);
  run_gemm(out.device(), out.dtype(), a, b, result_matrix(out, {}, rows, out_f), {}, 1.0, beta);
}

// Writes through `out` when it is contiguous and aliases no input, else through a temporary
// (allocated, copied into out, freed).
template <typename Fn>
void write_out(Tensor& out, const Tensor& a, const Tensor& b, Fn&& compute) {
  if (out.is_contiguous() && !out.shares_storage_with(a) && !out.shares_storage_with(b)) {
    compute(out);
    return;
  }
  Tensor tmp = new_tensor(out.sizes(), out.dtype(), out.device());
  compute(tmp);
  if (tmp.numel() > 0) kernels_for(out.device()).copy(detail::operand(out), detail::operand(tmp));
}

}  // namespace

Tensor mm(const Tensor& mat1, const Tensor& mat2) {
  check_pair("mm", mat1, mat2, "mat1", "mat2");
  TraceOpScope trace("mm");
  const std::vector<Tensor> in = detail::autocast(OpKind::Mm, {mat1, mat2});
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  check_matrix("mm", a, "mat1");
  check_matrix("mm", b, "mat2");
  check_inner_2d("mm", a.size(0), a.size(1), b.size(0), b.size(1));
  check_dtypes("mm", a, b);
  Shape batch;
  Tensor out = new_tensor({a.size(0), b.size(1)}, a.dtype(), a.device());
  matmul_into(out, a, b, batch);
  if (should_record({&a, &b})) detail::record(OpKind::Mm, {a, b}, {out});
  return out;
}

Tensor bmm(const Tensor& batch1, const Tensor& batch2) {
  check_pair("bmm", batch1, batch2, "batch1", "batch2");
  TraceOpScope trace("bmm");
  const std::vector<Tensor> in = detail::autocast(OpKind::Bmm, {batch1, batch2});
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  for (const Tensor* t : {&a, &b}) {
    if (t->dim() != 3) {
      throw ShapeError(fmt::format("[bmm] {} must be a 3D tensor, got shape {}",
                                   t == &a ? "batch1" : "batch2", to_string(t->sizes())),
                       "bmm", ShapeRoles::given(t->sizes()));
    }
  }
  if (a.size(0) != b.size(0) || a.size(2) != b.size(1)) {
    throw ShapeError(fmt::format("[bmm] batch1 and batch2 shapes cannot be multiplied ({} and {}): "
                                 "expected batch2 of shape [{}, {}, m]",
                                 to_string(a.sizes()), to_string(b.sizes()), a.size(0), a.size(2)),
                     "bmm", ShapeRoles::operands(a.sizes(), b.sizes()));
  }
  check_dtypes("bmm", a, b);
  const Shape batch{a.size(0)};
  Tensor out = new_tensor({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  matmul_into(out, a, b, batch);
  if (should_record({&a, &b})) detail::record(OpKind::Bmm, {a, b}, {out});
  return out;
}

Tensor matmul(const Tensor& input, const Tensor& other) {
  check_pair("matmul", input, other, "input", "other");
  TraceOpScope trace("matmul");
  const std::vector<Tensor> in = detail::autocast(OpKind::Matmul, {input, other});
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  Shape batch;
  const Shape shape = matmul_shape("matmul", a, b, batch);
  check_dtypes("matmul", a, b);
  Tensor out = new_tensor(shape, a.dtype(), a.device());
  matmul_into(out, a, b, batch);
  if (should_record({&a, &b})) detail::record(OpKind::Matmul, {a, b}, {out});
  return out;
}

Tensor addmm(const Tensor& bias, const Tensor& mat1, const Tensor& mat2, Scalar beta,
             Scalar alpha) {
  check_pair("addmm", mat1, mat2, "mat1", "mat2");
  detail::check_defined("addmm", bias, "self");
  detail::check_same_device("addmm", bias, mat1);
  TraceOpScope trace("addmm");
  const std::vector<Tensor> in = detail::autocast(OpKind::Addmm, {bias, mat1, mat2});
  const Tensor& c = in[0];
  const Tensor& a = in[1];
  const Tensor& b = in[2];
  check_matrix("addmm", a, "mat1");
  check_matrix("addmm", b, "mat2");
  check_inner_2d("addmm", a.size(0), a.size(1), b.size(0), b.size(1));
  check_dtypes("addmm", a, b);
  check_dtypes("addmm", c, a);
  const Shape shape{a.size(0), b.size(1)};
  if (!(broadcast_shapes(c.sizes(), shape, "addmm") == shape)) {
    throw ShapeError(fmt::format("[addmm] self of shape {} cannot be broadcast to the product's "
                                 "shape {}",
                                 to_string(c.sizes()), to_string(shape)),
                     "addmm", ShapeRoles::wanted(shape, c.sizes()));
  }
  Tensor out = new_tensor(shape, a.dtype(), a.device());
  // beta = 0 ignores self entirely (NaN in self does not propagate), as in PyTorch.
  const double beta_v = beta.to_double();
  if (beta_v != 0.0 && out.numel() > 0) {
    kernels_for(out.device()).copy(detail::operand(out), detail::operand(c, shape));
  }
  if (out.numel() > 0) {
    const Tensor ra = gemm_operand(a);
    const Tensor rb = gemm_operand(b);
    run_gemm(out.device(), out.dtype(), as_matrix(ra, true, {}), as_matrix(rb, false, {}),
             result_matrix(out, {}, shape[0], shape[1]), {}, alpha.to_double(), beta_v);
  }
  if (should_record({&c, &a, &b})) {
    detail::record(OpKind::Addmm, {c, a, b}, {out}, AddmmAttrs{beta_v, alpha.to_double()});
  }
  return out;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_pair("linear", input, weight, "input", "weight");
  if (bias.defined()) detail::check_same_device("linear", input, bias);
  TraceOpScope trace("linear");
  const std::vector<Tensor> in = bias.defined()
                                     ? detail::autocast(OpKind::Linear, {input, weight, bias})
                                     : detail::autocast(OpKind::Linear, {input, weight});
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor b = bias.defined() ? in[2] : Tensor();
  check_matrix("linear", w, "weight");
  if (x.dim() == 0) {
    throw ShapeError("[linear] input must have at least 1 dimension, got a 0-D tensor", "linear",
                     ShapeRoles::given(x.sizes()));
  }
  const int64_t in_features = x.size(-1);
  const int64_t rows = numel_of(leading(x.sizes(), x.dim() - 1));
  if (in_features != w.size(1)) {
    throw ShapeError(fmt::format("[linear] mat1 and mat2 shapes cannot be multiplied ({}x{} and "
                                 "{}x{}): input {} and weight {} (out_features x in_features)",
                                 rows, in_features, w.size(1), w.size(0), to_string(x.sizes()),
                                 to_string(w.sizes())),
                     "linear", ShapeRoles::operands(x.sizes(), w.sizes()));
  }
  check_dtypes("linear", x, w);
  if (b.defined()) check_dtypes("linear", b, w);
  Shape shape = x.sizes();
  shape[shape.size() - 1] = w.size(0);
  if (b.defined() && !(broadcast_shapes(b.sizes(), shape, "linear") == shape)) {
    throw ShapeError(fmt::format("[linear] bias of shape {} cannot be broadcast to the output "
                                 "shape {}",
                                 to_string(b.sizes()), to_string(shape)),
                     "linear", ShapeRoles::wanted(shape, b.sizes()));
  }
  Tensor out = new_tensor(shape, x.dtype(), x.device());
  if (out.numel() > 0) {
    if (b.defined())
      kernels_for(out.device()).copy(detail::operand(out), detail::operand(b, shape));
    linear_gemm(out, x, w, b.defined() ? 1.0 : 0.0);
  }
  if (should_record({&x, &w, &b})) {
    if (b.defined()) {
      detail::record(OpKind::Linear, {x, w, b}, {out});
    } else {
      detail::record(OpKind::Linear, {x, w}, {out});
    }
  }
  return out;
}

namespace {

// Whether linear_backward can run its two products as one pair of kernel calls: both gradients
// wanted, no autograd record or autocast to apply, and every operand readable by GEMM as it
// stands (grad and x contiguous, so folding their leading dims into rows copies nothing).
bool pair_ready(const Tensor& grad, const Tensor& x, const Tensor& weight) {
  if (!grad.defined() || !x.defined() || !weight.defined()) return false;
  if (grad.dim() < 2 || x.dim() != grad.dim() || weight.dim() != 2) return false;
  if (grad.device() != x.device() || weight.device() != x.device()) return false;
  if (grad.dtype() != x.dtype() || weight.dtype() != x.dtype() || !is_floating(x.dtype())) {
    return false;
  }
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  if (grad.size(-1) != out_f || x.size(-1) != in_f) return false;
  for (int d = 0; d + 1 < x.dim(); ++d) {
    if (grad.size(d) != x.size(d)) return false;
  }
  return grad.numel() > 0 && x.numel() > 0 && grad.is_contiguous() && x.is_contiguous() &&
         gemm_ready(out_f, in_f, weight.stride(0), weight.stride(1)) && !autocast_enabled() &&
         !should_record({&grad, &x, &weight});
}

}  // namespace

std::array<Tensor, 3> linear_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                      std::array<bool, 3> needs) {
  detail::check_defined("linear_backward", grad, "grad");
  std::array<Tensor, 3> grads;
  const int64_t out_f = grad.dim() == 0 ? 1 : grad.size(-1);
  if (needs[0] && needs[1] && pair_ready(grad, x, weight)) {
    const int64_t in_f = x.size(-1), rows = x.numel() / in_f;
    // Allocated in the order, and under the op names, of the matmul and mm below.
    {
      TraceOpScope trace("matmul");
      grads[0] = new_tensor(x.sizes(), x.dtype(), x.device());
    }
    {
      TraceOpScope trace("mm");
      grads[1] = new_tensor(weight.sizes(), x.dtype(), x.device());
    }
    // Views, no copies: grad and x are contiguous.
    const Tensor g2 = grad.reshape({rows, out_f}), x2 = x.reshape({rows, in_f});
    kernels_for(x.device())
        .gemm_pair(matrix_gemm(x.dtype(), as_matrix(g2, true, {}), as_matrix(weight, false, {}),
                               result_matrix(grads[0], {}, rows, in_f), 1.0, 0.0),
                   matrix_gemm(x.dtype(), as_matrix(g2.t(), true, {}), as_matrix(x2, false, {}),
                               result_matrix(grads[1], {}, out_f, in_f), 1.0, 0.0));
    if (needs[2]) grads[2] = g2.sum({0});
    return grads;
  }
  if (needs[0]) grads[0] = matmul(grad, weight);
  if (needs[1] || needs[2]) {
    const Tensor g2 = grad.reshape({-1, out_f});
    if (needs[1]) grads[1] = mm(g2.t(), x.reshape({-1, x.size(-1)}));
    if (needs[2]) grads[2] = g2.sum({0});
  }
  return grads;
}

Tensor& mm_out(Tensor& out, const Tensor& mat1, const Tensor& mat2) {
  check_pair("mm_out", mat1, mat2, "mat1", "mat2");
  TraceOpScope trace("mm_out");
  check_matrix("mm_out", mat1, "mat1");
  check_matrix("mm_out", mat2, "mat2");
  check_inner_2d("mm_out", mat1.size(0), mat1.size(1), mat2.size(0), mat2.size(1));
  check_dtypes("mm_out", mat1, mat2);
  detail::prepare_out(out, {mat1.size(0), mat2.size(1)}, mat1.dtype(), mat1.device(), "mm_out");
  write_out(out, mat1, mat2, [&](const Tensor& dst) { matmul_into(dst, mat1, mat2, {}); });
  out.storage().bump_version();
  return out;
}

Tensor& matmul_out(Tensor& out, const Tensor& input, const Tensor& other) {
  check_pair("matmul_out", input, other, "input", "other");
  TraceOpScope trace("matmul_out");
  Shape batch;
  const Shape shape = matmul_shape("matmul_out", input, other, batch);
  check_dtypes("matmul_out", input, other);
  detail::prepare_out(out, shape, input.dtype(), input.device(), "matmul_out");
  write_out(out, input, other, [&](const Tensor& dst) { matmul_into(dst, input, other, batch); });
  out.storage().bump_version();
  return out;
}

}  // namespace memgrad
