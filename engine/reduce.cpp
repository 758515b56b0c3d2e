// Reductions and softmax front-end: dims and dtypes validated, one result allocated, the kernel
// call, the autograd record.
//
// A reduction allocates its result directly in its final shape (with or without the reduced
// dims). The kernel sees that result through an operand with the input's ndim: size 1 and
// stride 0 along the reduced dims (the backend's convention), so neither a view nor a temporary
// is made and the returned tensor is not a view. The one temporary in the family is argmax /
// argmin without a dim of a non-contiguous input, which flattens a contiguous copy first (as
// PyTorch's reshape(-1) does) and frees it before returning.
#include "engine/reduce.h"

#include <fmt/format.h>

#include <array>

#include "allocator/trace.h"
#include "engine/error.h"
#include "engine/op_support.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::operand;
using detail::should_record;
using kernels::ReduceOp;

// PyTorch's ScalarType names, for the messages that quote them ("Got: Long").
const char* torch_type_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Int64: return "Long";
    case DType::Bool: return "Bool";
  }
  return "?";
}

// Throws DTypeError naming `op` unless `x` is floating (mean, var, std, norm, logsumexp,
// softmax). PyTorch's wording where it has one.
void check_floating(const char* op, const Tensor& x) {
  const DType d = x.dtype();
  if (is_floating(d)) return;
  const std::string name = op;
  if (name == "mean") {
    throw DTypeError(fmt::format("[mean] mean(): could not infer output dtype. Input dtype must "
                                 "be either a floating point or complex dtype. Got: {}",
                                 torch_type_name(d)),
                     "mean", {d});
  }
  if (name == "var" || name == "std") {
    throw DTypeError(fmt::format("[{}] std and var only support floating point and complex "
                                 "dtypes. Got: {} ({})",
                                 op, torch_type_name(d), dtype_name(d)),
                     op, {d});
  }
  if (name == "norm") {
    throw DTypeError(fmt::format("[norm] linalg.vector_norm: Expected a floating point or complex "
                                 "tensor as input. Got {} ({})",
                                 torch_type_name(d), dtype_name(d)),
                     "norm", {d});
  }
  throw DTypeError(fmt::format("[{}] expected a floating point input, got {}: convert it with "
                               ".to(float32) first",
                               op, dtype_name(d)),
                   op, {d});
}

// Which dims a reduction removes, and the shapes it produces.
struct Reduction {
  Shape dims;                            // wrapped, ascending; every dim when none was given
  std::array<bool, kMaxDims> reduced{};  // per input dim
  Shape out_shape;                       // the result's sizes (keepdim: reduced dims kept as 1)
  bool keepdim = false;
};

// Wraps and deduplicates `dims` (empty: every dim) of x. Throws IndexError for a dim out of
// range, ShapeError for a repeated dim.
Reduction plan_reduction(const char* op, const Tensor& x, const Shape& dims, bool keepdim) {
  Reduction r;
  r.keepdim = keepdim;
  const int nd = x.dim();
  std::array<bool, kMaxDims> seen{};
  for (int64_t dim : dims) {
    const int d = wrap_dim(dim, nd, op);
    if (seen[static_cast<size_t>(d)]) {
      throw ShapeError(fmt::format("[{}] dim {} appears multiple times in the list of dims", op, d),
                       op, ShapeRoles::wanted(dims, x.sizes()));
    }
    seen[static_cast<size_t>(d)] = true;
  }
  for (int d = 0; d < nd; ++d) {
    const bool reduced = dims.empty() || seen[static_cast<size_t>(d)];
    r.reduced[static_cast<size_t>(d)] = reduced;
    if (reduced) r.dims.push_back(d);
    if (!reduced) {
      r.out_shape.push_back(x.size(d));
    } else if (keepdim) {
      r.out_shape.push_back(1);
    }
  }
  return r;
}

// The result `out` seen with the input's ndim: size 1 and stride 0 along reduced dims.
kernels::Operand reduced_operand(const Tensor& out, const Tensor& x, const Reduction& r) {
  kernels::Operand op;
  op.data = out.data_ptr();
  op.dtype = out.dtype();
  op.ndim = x.dim();
  int k = 0;  // dim of `out`
  for (int d = 0; d < x.dim(); ++d) {
    if (r.reduced[static_cast<size_t>(d)]) {
      op.sizes[d] = 1;
      op.strides[d] = 0;
      if (r.keepdim) ++k;
    } else {
      op.sizes[d] = out.size(k);
      op.strides[d] = out.stride(k);
      ++k;
    }
  }
  return op;
}

ReductionAttrs reduction_attrs(const Reduction& r) { return ReductionAttrs{r.dims, r.keepdim}; }

// Throws ShapeError when a reduced dim of x is empty (max, min, amax, amin, argmax, argmin).
void check_nonempty_dims(const char* op, const Tensor& x, const Reduction& r) {
  for (int64_t d : r.dims) {
    if (x.size(d) == 0) {
      throw ShapeError(
          fmt::format("[{}] {}(): Expected reduction dim {} to have non-zero size.", op, op, d), op,
          ShapeRoles::given(x.sizes()));
    }
  }
}

// The shared body of sum, mean, prod-like folds, amax/amin, full max/min, any and all: one
// result of `out_dtype`, then a record of `kind` (any and all are not differentiable).
Tensor fold(ReduceOp op, std::optional<OpKind> kind, const Tensor& x, const Reduction& r,
            DType out_dtype) {
  Tensor out = new_tensor(r.out_shape, out_dtype, x.device());
  kernels_for(x.device()).reduce(op, reduced_operand(out, x, r), operand(x));
  if (kind && should_record({&x})) detail::record(*kind, {x}, {out}, reduction_attrs(r));
  return out;
}

// Full max/min of a non-empty tensor, a 0-d result.
Tensor extreme_all(const char* name, bool is_max, const Tensor& x) {
  detail::check_defined(name, x);
  if (x.numel() == 0) {
    throw ShapeError(
        fmt::format(
            "[{}] {}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument.",
            name, name),
        name, ShapeRoles::given(x.sizes()));
  }
  TraceOpScope trace(name);
  const Reduction r = plan_reduction(name, x, {}, false);
  return fold(is_max ? ReduceOp::Max : ReduceOp::Min, is_max ? OpKind::MaxAll : OpKind::MinAll, x,
              r, x.dtype());
}

Tensor extreme_dims(const char* name, bool is_max, const Tensor& x, const Shape& dims,
                    bool keepdim) {
  detail::check_defined(name, x);
  const Reduction r = plan_reduction(name, x, dims, keepdim);
  check_nonempty_dims(name, x, r);
  TraceOpScope trace(name);
  return fold(is_max ? ReduceOp::Max : ReduceOp::Min, is_max ? OpKind::Amax : OpKind::Amin, x, r,
              x.dtype());
}

// (values, indices) along one dim; values may be skipped (argmax/argmin).
std::pair<Tensor, Tensor> arg_extreme(const char* name, bool is_max, const Tensor& x, int64_t dim,
                                      bool keepdim, bool want_values) {
  detail::check_defined(name, x);
  const int d = wrap_dim(dim, x.dim(), name);
  const Reduction r = plan_reduction(name, x, x.dim() == 0 ? Shape{} : Shape{d}, keepdim);
  check_nonempty_dims(name, x, r);
  TraceOpScope trace(name);
  Tensor indices = new_tensor(r.out_shape, kInt64, x.device());
  Tensor values;
  kernels::Operand values_op = reduced_operand(indices, x, r);
  values_op.data = nullptr;
  if (want_values) {
    values = new_tensor(r.out_shape, x.dtype(), x.device());
    values_op = reduced_operand(values, x, r);
  }
  kernels_for(x.device())
      .arg_reduce(is_max, values_op, reduced_operand(indices, x, r), operand(x), d);
  return {values, indices};
}

// argmax/argmin without a dim: the index into the row-major flattened tensor.
Tensor arg_extreme_flat(const char* name, bool is_max, const Tensor& x, bool keepdim) {
  detail::check_defined(name, x);
  if (x.numel() == 0) {
    throw ShapeError(
        fmt::format("[{}] {}(): Expected reduction dim to be specified for input.numel() == 0.",
                    name, name),
        name, ShapeRoles::given(x.sizes()));
  }
  TraceOpScope trace(name);
  Tensor flat_source = x;
  if (!x.is_contiguous()) {
    // A temporary contiguous copy, freed on return (PyTorch's reshape(-1) copies too).
    flat_source = new_tensor(x.sizes(), x.dtype(), x.device());
    kernels_for(x.device()).copy(operand(flat_source), operand(x));
  }
  kernels::Operand in;
  in.data = flat_source.data_ptr();
  in.dtype = x.dtype();
  in.ndim = 1;
  in.sizes[0] = x.numel();
  in.strides[0] = 1;
  Tensor indices = new_tensor(keepdim ? Shape::filled(x.dim(), 1) : Shape{}, kInt64, x.device());
  kernels::Operand index_op;
  index_op.data = indices.data_ptr();
  index_op.dtype = kInt64;
  index_op.ndim = 1;
  index_op.sizes[0] = 1;
  index_op.strides[0] = 0;
  kernels::Operand values_op = index_op;
  values_op.data = nullptr;
  kernels_for(x.device()).arg_reduce(is_max, values_op, index_op, in, 0);
  return indices;
}

Tensor variance(const char* name, OpKind kind, const Tensor& x, const Shape& dims,
                int64_t correction, bool keepdim) {
  detail::check_defined(name, x);
  check_floating(name, x);
  const Reduction r = plan_reduction(name, x, dims, keepdim);
  TraceOpScope trace(name);
  Tensor out = new_tensor(r.out_shape, x.dtype(), x.device());
  kernels_for(x.device())
      .var(reduced_operand(out, x, r), operand(x), correction, kind == OpKind::Std);
  if (should_record({&x})) {
    detail::record(kind, {x}, {out}, VarianceAttrs{reduction_attrs(r), correction});
  }
  return out;
}

// 0-d tensors soft-max over their single element: the kernel sees them as [1].
kernels::Operand softmax_operand(const Tensor& t) {
  kernels::Operand op = operand(t);
  if (op.ndim == 0) {
    op.ndim = 1;
    op.sizes[0] = 1;
    op.strides[0] = 1;
  }
  return op;
}

Tensor softmax_op(const char* name, bool log, const Tensor& input, int64_t dim) {
  detail::check_defined(name, input);
  TraceOpScope trace(name);
  const OpKind kind = log ? OpKind::LogSoftmax : OpKind::Softmax;
  const std::vector<Tensor> in = detail::autocast(kind, {input});
  const Tensor& x = in[0];
  check_floating(name, x);
  const int d = wrap_dim(dim, x.dim(), name);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  kernels_for(x.device()).softmax(softmax_operand(out), softmax_operand(x), d, log);
  if (should_record({&x})) detail::record(kind, {x}, {out}, SoftmaxAttrs{d});
  return out;
}

}  // namespace

Tensor sum(const Tensor& input, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  detail::check_defined("sum", input);
  TraceOpScope trace("sum");
  const std::vector<Tensor> in = detail::autocast(OpKind::Sum, {input});
  const Tensor& x = in[0];
  const Reduction r = plan_reduction("sum", x, dims, keepdim);
  // Integer and bool tensors sum to int64, as in PyTorch; `dtype` converts while summing.
  const DType out_dtype = dtype.value_or(is_floating(x.dtype()) ? x.dtype() : kInt64);
  return fold(ReduceOp::Sum, OpKind::Sum, x, r, out_dtype);
}

Tensor mean(const Tensor& input, const Shape& dims, bool keepdim) {
  detail::check_defined("mean", input);
  TraceOpScope trace("mean");
  const std::vector<Tensor> in = detail::autocast(OpKind::Mean, {input});
  const Tensor& x = in[0];
  check_floating("mean", x);
  const Reduction r = plan_reduction("mean", x, dims, keepdim);
  return fold(ReduceOp::Mean, OpKind::Mean, x, r, x.dtype());
}

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return variance("var", OpKind::Var, x, dims, correction, keepdim);
}

Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return variance("std", OpKind::Std, x, dims, correction, keepdim);
}

Tensor max(const Tensor& x) { return extreme_all("max", true, x); }
Tensor min(const Tensor& x) { return extreme_all("min", false, x); }

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto result = arg_extreme("max", true, x, dim, keepdim, true);
  if (should_record({&x})) {
    const ArgReductionAttrs attrs{wrap_dim(dim, x.dim(), "max"), keepdim};
    detail::record(OpKind::MaxDim, {x}, {result.first, result.second}, attrs);
  }
  return result;
}

std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto result = arg_extreme("min", false, x, dim, keepdim, true);
  if (should_record({&x})) {
    const ArgReductionAttrs attrs{wrap_dim(dim, x.dim(), "min"), keepdim};
    detail::record(OpKind::MinDim, {x}, {result.first, result.second}, attrs);
  }
  return result;
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme_dims("amax", true, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme_dims("amin", false, x, dims, keepdim);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return arg_extreme_flat("argmax", true, x, keepdim);
  return arg_extreme("argmax", true, x, *dim, keepdim, false).second;
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return arg_extreme_flat("argmin", false, x, keepdim);
  return arg_extreme("argmin", false, x, *dim, keepdim, false).second;
}

Tensor logsumexp(const Tensor& input, const Shape& dims, bool keepdim) {
  detail::check_defined("logsumexp", input);
  TraceOpScope trace("logsumexp");
  const std::vector<Tensor> in = detail::autocast(OpKind::LogSumExp, {input});
  const Tensor& x = in[0];
  check_floating("logsumexp", x);
  const Reduction r = plan_reduction("logsumexp", x, dims, keepdim);
  Tensor out = new_tensor(r.out_shape, x.dtype(), x.device());
  kernels_for(x.device()).logsumexp(reduced_operand(out, x, r), operand(x));
  if (should_record({&x})) detail::record(OpKind::LogSumExp, {x}, {out}, reduction_attrs(r));
  return out;
}

Tensor norm(const Tensor& input, double p, const Shape& dims, bool keepdim) {
  detail::check_defined("norm", input);
  TraceOpScope trace("norm");
  const std::vector<Tensor> in = detail::autocast(OpKind::Norm, {input});
  const Tensor& x = in[0];
  check_floating("norm", x);
  const Reduction r = plan_reduction("norm", x, dims, keepdim);
  Tensor out = new_tensor(r.out_shape, x.dtype(), x.device());
  kernels_for(x.device()).norm(reduced_operand(out, x, r), operand(x), p);
  if (should_record({&x})) {
    detail::record(OpKind::Norm, {x}, {out}, NormAttrs{reduction_attrs(r), p});
  }
  return out;
}

Tensor any(const Tensor& x) {
  detail::check_defined("any", x);
  TraceOpScope trace("any");
  return fold(ReduceOp::Any, kNotDifferentiable, x, plan_reduction("any", x, {}, false), kBool);
}

Tensor all(const Tensor& x) {
  detail::check_defined("all", x);
  TraceOpScope trace("all");
  return fold(ReduceOp::All, kNotDifferentiable, x, plan_reduction("all", x, {}, false), kBool);
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", true, x, dim); }

Tensor& softmax_out(Tensor& out, const Tensor& x, int64_t dim) {
  detail::check_defined("softmax", x);
  TraceOpScope trace("softmax");
  check_floating("softmax", x);
  const int d = wrap_dim(dim, x.dim(), "softmax");
  detail::prepare_out(out, x.sizes(), x.dtype(), x.device(), "softmax");
  kernels_for(x.device()).softmax(softmax_operand(out), softmax_operand(x), d, false);
  out.storage().bump_version();
  return out;
}

}  // namespace memgrad
