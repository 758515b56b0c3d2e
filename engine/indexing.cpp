// Index ops and joining front-end: validation with PyTorch's rules, one allocation for the
// result, the index kernels (which report the first bad index instead of throwing), and the
// autograd records.
//
// cat and pad build no view tensors: they hand the copy kernel operands whose data pointer and
// sizes select a slice of the freshly allocated result, so each input is copied exactly once
// into its final place. embedding reads its result as (N, D) rows the same way.
#include "engine/indexing.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "allocator/trace.h"
#include "engine/error.h"
#include "engine/op_support.h"
#include "engine/reduce.h"

namespace memgrad {
namespace {

using detail::kernels_for;
using detail::new_tensor;
using detail::operand;
using detail::should_record;

void check_index_dtype(const char* op, const Tensor& index, const char* what) {
  if (index.dtype() != kInt64) {
    throw DTypeError(
        fmt::format("[{}] {} must be an int64 tensor, got {}", op, what, dtype_name(index.dtype())),
        op, {index.dtype()});
  }
}

// Raises the IndexError for an index kernel's report.
[[noreturn]] void throw_bad_index(const char* op, const kernels::IndexCheck& check, int dim,
                                  int64_t size) {
  throw IndexError(fmt::format("[{}] index {} is out of range for dimension {} with size {} "
                               "(at position {} of the index; valid indices are 0..{})",
                               op, check.value, dim, size, check.position, size - 1),
                   op,
                   {.index = check.value, .size = size, .dim = dim, .position = check.position});
}

// The kernel view of `t`, with a 0-d tensor read as shape [1] (PyTorch lets index ops treat a
// scalar as a one-element dimension).
kernels::Operand operand_1d(const Tensor& t) {
  kernels::Operand op = operand(t);
  if (op.ndim == 0) {
    op.ndim = 1;
    op.sizes[0] = 1;
    op.strides[0] = 1;
  }
  return op;
}

// A contiguous copy on the same device, not recorded (the op records its own inputs).
Tensor copied(const Tensor& t) {
  Tensor out = new_tensor(t.sizes(), t.dtype(), t.device());
  if (t.numel() > 0) kernels_for(t.device()).copy(operand(out), operand(t));
  return out;
}

// Whether an op on a list of tensors must be recorded (should_record for a vector).
bool should_record_list(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled() || autograd_seam() == nullptr) return false;
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

// gather/scatter shape rules: index has self's ndim, and is no larger than self (except along
// dim) and than src (everywhere).
void check_gather_shapes(const char* op, const Tensor& self, const Tensor& index, int dim,
                         const Tensor* src) {
  if (index.dim() != self.dim() || (src != nullptr && src->dim() != self.dim())) {
    throw ShapeError(fmt::format("[{}] index (shape {}) must have the same number of dimensions "
                                 "as self (shape {}){}",
                                 op, to_string(index.sizes()), to_string(self.sizes()),
                                 src != nullptr ? " and src" : ""),
                     op, ShapeRoles::operands(index.sizes(), self.sizes()));
  }
  for (int d = 0; d < index.dim(); ++d) {
    const bool too_big_self = d != dim && index.size(d) > self.size(d);
    const bool too_big_src = src != nullptr && index.size(d) > src->size(d);
    if (too_big_self || too_big_src) {
      throw ShapeError(
          fmt::format("[{}] index of shape {} is larger than {} of shape {} at "
                      "dimension {}",
                      op, to_string(index.sizes()), too_big_self ? "self" : "src",
                      to_string(too_big_self ? self.sizes() : src->sizes()), d),
          op, ShapeRoles::operands(index.sizes(), too_big_self ? self.sizes() : src->sizes()));
    }
  }
}

void check_scatter(const char* op, const Tensor& self, const Tensor& index, const Tensor& src,
                   int dim) {
  detail::check_defined(op, src, "src");
  detail::check_same_device(op, self, index);
  detail::check_same_device(op, self, src);
  check_index_dtype(op, index, "index");
  if (self.dtype() != src.dtype()) {
    throw DTypeError(fmt::format("[{}] self and src must have the same dtype, got {} and {}", op,
                                 dtype_name(self.dtype()), dtype_name(src.dtype())),
                     op, {self.dtype(), src.dtype()});
  }
  check_gather_shapes(op, self, index, dim, &src);
}

// `out`'s operand restricted to [start, start + length) along `dim`.
kernels::Operand narrowed(const kernels::Operand& out, int dim, int64_t start, int64_t length) {
  kernels::Operand op = out;
  op.data = static_cast<char*>(op.data) +
            start * op.strides[dim] * static_cast<int64_t>(element_size(op.dtype));
  op.sizes[dim] = length;
  return op;
}

}  // namespace

// ---- gathering ----

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined("index_select", x, "self");
  detail::check_defined("index_select", index, "index");
  detail::check_same_device("index_select", x, index);
  check_index_dtype("index_select", index, "index");
  if (index.dim() > 1) {
    throw ShapeError(fmt::format("[index_select] index must be a 0-D or 1-D tensor, got shape {}",
                                 to_string(index.sizes())),
                     "index_select", ShapeRoles::given(index.sizes()));
  }
  const int d = wrap_dim(dim, x.dim(), "index_select");
  TraceOpScope trace("index_select");
  Shape shape = x.sizes();
  if (x.dim() == 0) {
    if (index.dim() == 1) shape.push_back(index.numel());
  } else {
    shape[d] = index.numel();
  }
  Tensor out = new_tensor(shape, x.dtype(), x.device());
  if (index.numel() > 0) {
    const kernels::IndexCheck check =
        kernels_for(x.device()).index_select(operand_1d(out), operand_1d(x), operand(index), d);
    if (!check.ok) throw_bad_index("index_select", check, d, x.dim() == 0 ? 1 : x.size(d));
  }
  if (should_record({&x})) detail::record(OpKind::IndexSelect, {x, index}, {out}, IndexDimAttrs{d});
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined("gather", x, "self");
  detail::check_defined("gather", index, "index");
  detail::check_same_device("gather", x, index);
  check_index_dtype("gather", index, "index");
  const int d = wrap_dim(dim, x.dim(), "gather");
  check_gather_shapes("gather", x, index, d, nullptr);
  TraceOpScope trace("gather");
  Tensor out = new_tensor(index.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) {
    const kernels::IndexCheck check =
        kernels_for(x.device()).gather(operand_1d(out), operand_1d(x), operand_1d(index), d);
    if (!check.ok) throw_bad_index("gather", check, d, x.dim() == 0 ? 1 : x.size(d));
  }
  if (should_record({&x})) detail::record(OpKind::Gather, {x, index}, {out}, IndexDimAttrs{d});
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_defined("scatter_add", self, "self");
  detail::check_defined("scatter_add", index, "index");
  const int d = wrap_dim(dim, self.dim(), "scatter_add");
  check_scatter("scatter_add", self, index, src, d);
  TraceOpScope trace("scatter_add");
  Tensor out = copied(self);
  if (index.numel() > 0) {
    const kernels::IndexCheck check =
        kernels_for(self.device())
            .scatter_add(operand_1d(out), operand_1d(index), operand_1d(src), d);
    if (!check.ok) throw_bad_index("scatter_add", check, d, self.dim() == 0 ? 1 : self.size(d));
  }
  if (should_record({&self, &src})) {
    detail::record(OpKind::ScatterAdd, {self, index, src}, {out}, IndexDimAttrs{d});
  }
  return out;
}

Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_defined("scatter_add_", self, "self");
  detail::check_defined("scatter_add_", index, "index");
  const int d = wrap_dim(dim, self.dim(), "scatter_add_");
  check_scatter("scatter_add_", self, index, src, d);
  TraceOpScope trace("scatter_add_");
  detail::InplaceRecord rec(OpKind::ScatterAdd, self, {index, src}, IndexDimAttrs{d});
  if (index.numel() > 0) {
    const kernels::IndexCheck check =
        kernels_for(self.device())
            .scatter_add(operand_1d(self), operand_1d(index), operand_1d(src), d);
    // The kernel wrote nothing: self and its version are unchanged.
    if (!check.ok) throw_bad_index("scatter_add_", check, d, self.dim() == 0 ? 1 : self.size(d));
  }
  rec.finish(self);
  return self;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  detail::check_defined("embedding", weight, "weight");
  detail::check_defined("embedding", indices, "indices");
  detail::check_same_device("embedding", weight, indices);
  check_index_dtype("embedding", indices, "indices");
  if (weight.dim() != 2) {
    throw ShapeError(fmt::format("[embedding] weight must be 2-D (num_embeddings, "
                                 "embedding_dim), got shape {}",
                                 to_string(weight.sizes())),
                     "embedding", ShapeRoles::given(weight.sizes()));
  }
  TraceOpScope trace("embedding");
  Shape shape = indices.sizes();
  shape.push_back(weight.size(1));
  Tensor out = new_tensor(shape, weight.dtype(), weight.device());
  if (indices.numel() > 0) {
    // The indices read as one flat list (a contiguous temporary only if they are strided), the
    // result as (N, D) rows.
    const Tensor flat = indices.is_contiguous() ? indices : copied(indices);
    kernels::Operand idx = operand(flat);
    idx.ndim = 1;
    idx.sizes[0] = flat.numel();
    idx.strides[0] = 1;
    kernels::Operand rows = operand(out);
    rows.ndim = 2;
    rows.sizes[0] = flat.numel();
    rows.sizes[1] = weight.size(1);
    rows.strides[0] = weight.size(1);
    rows.strides[1] = 1;
    const kernels::IndexCheck check =
        kernels_for(weight.device()).index_select(rows, operand(weight), idx, 0);
    if (!check.ok) throw_bad_index("embedding", check, 0, weight.size(0));
  }
  if (should_record({&weight})) detail::record(OpKind::Embedding, {weight, indices}, {out});
  return out;
}

// ---- masks and labels ----

namespace {

void check_mask(const char* op, const Tensor& x, const Tensor& mask) {
  detail::check_defined(op, x, "self");
  detail::check_defined(op, mask, "mask");
  detail::check_same_device(op, x, mask);
  if (mask.dtype() != kBool) {
    throw DTypeError(fmt::format("[{}] expected a bool mask, got dtype {}: build it with a "
                                 "comparison or .to(bool)",
                                 op, dtype_name(mask.dtype())),
                     op, {mask.dtype()});
  }
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  check_mask("masked_fill", x, mask);
  value.check_fits(x.dtype(), "masked_fill");
  TraceOpScope trace("masked_fill");
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill");
  Tensor out = new_tensor(shape, x.dtype(), x.device());
  if (out.numel() > 0) {
    kernels::KernelBackend& kernels = kernels_for(x.device());
    kernels.copy(operand(out), operand(x, shape));
    kernels.masked_fill(operand(out), operand(mask, shape), value.to_double());
  }
  if (should_record({&x})) {
    detail::record(OpKind::MaskedFill, {x, mask}, {out}, FillAttrs{value.to_double()});
  }
  return out;
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, Scalar value) {
  check_mask("masked_fill_", x, mask);
  value.check_fits(x.dtype(), "masked_fill_");
  TraceOpScope trace("masked_fill_");
  if (!(broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill_") == x.sizes())) {
    throw ShapeError(fmt::format("[masked_fill_] mask of shape {} cannot be broadcast to self's "
                                 "shape {} (an in-place op cannot grow self)",
                                 to_string(mask.sizes()), to_string(x.sizes())),
                     "masked_fill_", ShapeRoles::wanted(x.sizes(), mask.sizes()));
  }
  detail::InplaceRecord rec(OpKind::MaskedFill, x, {mask}, FillAttrs{value.to_double()});
  if (x.numel() > 0) {
    kernels_for(x.device()).masked_fill(operand(x), operand(mask, x.sizes()), value.to_double());
  }
  rec.finish(x);
  return x;
}

Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  detail::check_defined("one_hot", labels, "labels");
  check_index_dtype("one_hot", labels, "labels");
  TraceOpScope trace("one_hot");
  if (num_classes < 0) {
    if (labels.numel() == 0) {
      throw ValueError(
          "[one_hot] cannot infer the number of classes from an empty tensor: pass "
          "num_classes",
          "one_hot", "num_classes");
    }
    // A 0-d temporary on the device holds the largest label while it is read.
    num_classes = std::max<int64_t>(labels.max().item<int64_t>() + 1, 0);
  }
  Shape shape = labels.sizes();
  shape.push_back(num_classes);
  Tensor out = new_tensor(shape, kInt64, labels.device());
  if (labels.numel() > 0) {
    const kernels::IndexCheck check =
        kernels_for(labels.device()).one_hot(operand(out), operand(labels));
    if (!check.ok && check.value < 0) {
      throw IndexError(fmt::format("[one_hot] class values must be non-negative, got {} at "
                                   "position {}",
                                   check.value, check.position),
                       "one_hot", {.index = check.value, .position = check.position});
    }
    if (!check.ok) {
      throw IndexError(fmt::format("[one_hot] class value {} at position {} is out of range for "
                                   "num_classes {}",
                                   check.value, check.position, num_classes),
                       "one_hot",
                       {.index = check.value, .size = num_classes, .position = check.position});
    }
  }
  return out;
}

// ---- joining ----

namespace {

// Checks that `t` (entry i of the list) can join `ref` along `dim` in `op`.
void check_cat_entry(const char* op, const Tensor& ref, const Tensor& t, size_t i, int dim) {
  detail::check_same_device(op, ref, t);
  if (t.dtype() != ref.dtype()) {
    throw DTypeError(fmt::format("[{}] expected all tensors to have dtype {}, but tensor {} has "
                                 "dtype {}: convert it with .to(dtype)",
                                 op, dtype_name(ref.dtype()), i, dtype_name(t.dtype())),
                     op, {ref.dtype(), t.dtype()});
  }
  if (t.dim() != ref.dim()) {
    throw ShapeError(
        fmt::format("[{}] tensors must have the same number of dimensions: got {} "
                    "({}) and {} ({}) for tensor {}",
                    op, ref.dim(), to_string(ref.sizes()), t.dim(), to_string(t.sizes()), i),
        op, ShapeRoles::operands(ref.sizes(), t.sizes()));
  }
  for (int d = 0; d < t.dim(); ++d) {
    if (d != dim && t.size(d) != ref.size(d)) {
      throw ShapeError(fmt::format("[{}] sizes of tensors must match except in dimension {}: "
                                   "expected size {} but got size {} for tensor number {} in the "
                                   "list (dimension {})",
                                   op, dim, ref.size(d), t.size(d), i, d),
                       op, ShapeRoles::operands(ref.sizes(), t.sizes()));
    }
  }
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty())
    throw ValueError("[cat] expected a non-empty list of tensors", "cat", "tensors");
  for (const Tensor& t : tensors) detail::check_defined("cat", t, "tensor");
  TraceOpScope trace("cat");
  // 1-d empty tensors are skipped whatever their shape, as in PyTorch (legacy behaviour).
  std::vector<Tensor> parts;
  std::vector<size_t> positions;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dim() == 1 && tensors[i].size(0) == 0) continue;
    if (tensors[i].dim() == 0) {
      throw ShapeError(fmt::format("[cat] zero-dimensional tensor (at position {}) cannot be "
                                   "concatenated: unsqueeze it or use stack",
                                   i),
                       "cat", ShapeRoles::given(tensors[i].sizes()));
    }
    parts.push_back(tensors[i]);
    positions.push_back(i);
  }
  if (parts.empty()) return new_tensor({0}, tensors[0].dtype(), tensors[0].device());
  // Under autocast, mixed floating dtypes are cast to the widest (cat's "promote" policy).
  if (autocast_enabled()) {
    if (AutogradSeam* seam = autograd_seam()) seam->autocast_inputs(OpKind::Cat, parts);
  }
  const Tensor& ref = parts[0];
  const int d = wrap_dim(dim, ref.dim(), "cat");
  int64_t total = 0;
  std::vector<int64_t> split;
  for (size_t i = 0; i < parts.size(); ++i) {
    check_cat_entry("cat", ref, parts[i], positions[i], d);
    split.push_back(parts[i].size(d));
    total += parts[i].size(d);
  }
  Shape shape = ref.sizes();
  shape[d] = total;
  Tensor out = new_tensor(shape, ref.dtype(), ref.device());
  const kernels::Operand whole = operand(out);
  int64_t offset = 0;
  for (const Tensor& t : parts) {
    if (t.numel() > 0) {
      kernels_for(out.device()).copy(narrowed(whole, d, offset, t.size(d)), operand(t));
    }
    offset += t.size(d);
  }
  if (should_record_list(parts)) {
    autograd_seam()->record(OpKind::Cat, std::span<const Tensor>(parts),
                            std::span<const Tensor>(&out, 1), CatAttrs{d, split});
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty())
    throw ValueError("[stack] expected a non-empty list of tensors", "stack", "tensors");
  for (const Tensor& t : tensors) detail::check_defined("stack", t, "tensor");
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (!(tensors[i].sizes() == tensors[0].sizes())) {
      throw ShapeError(fmt::format("[stack] stack expects each tensor to be equal size, but got "
                                   "{} at entry 0 and {} at entry {}",
                                   to_string(tensors[0].sizes()), to_string(tensors[i].sizes()), i),
                       "stack", ShapeRoles::operands(tensors[0].sizes(), tensors[i].sizes()));
    }
  }
  const int d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  TraceOpScope trace("stack");
  // Unsqueezed views (no memory) joined by cat: one allocation, the result.
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) views.push_back(t.unsqueeze(d));
  return cat(views, d);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, Scalar value) {
  detail::check_defined("pad", x);
  const int pairs = static_cast<int>(padding.size() / 2);
  if (padding.size() % 2 != 0 || pairs > x.dim()) {
    throw ShapeError(fmt::format("[pad] padding length must be even and at most twice the "
                                 "number of dimensions ({}), got {} values",
                                 2 * x.dim(), padding.size()),
                     "pad", ShapeRoles::given(x.sizes()));
  }
  value.check_fits(x.dtype(), "pad");
  TraceOpScope trace("pad");
  Shape shape = x.sizes();
  for (int p = 0; p < pairs; ++p) {
    const int d = x.dim() - 1 - p;
    const int64_t left = padding[2 * p], right = padding[2 * p + 1];
    int64_t size = 0;
    if (__builtin_add_overflow(x.size(d), left, &size) ||
        __builtin_add_overflow(size, right, &size)) {
      throw ShapeError(fmt::format("[pad] the input size {} plus padding {} and {} overflows "
                                   "int64 at dimension {}",
                                   x.size(d), left, right, d),
                       "pad", ShapeRoles::given(x.sizes()));
    }
    shape[d] = size;
    if (shape[d] < 0) {
      throw ShapeError(fmt::format("[pad] the input size {}, plus padding {} and {}, resulted in "
                                   "a negative output size {} at dimension {}",
                                   x.size(d), left, right, shape[d], d),
                       "pad", ShapeRoles::wanted(shape, x.sizes()));
    }
  }
  Tensor out = new_tensor(shape, x.dtype(), x.device());
  if (out.numel() > 0) {
    kernels::KernelBackend& kernels = kernels_for(x.device());
    // Only positive padding leaves elements that x does not cover.
    if (std::any_of(padding.begin(), padding.end(), [](int64_t p) { return p > 0; })) {
      kernels.fill(operand(out), value.to_double());
    }
    // The interior: padding shifts x's start in out; negative padding crops x instead.
    kernels::Operand dst = operand(out);
    kernels::Operand src = operand(x);
    bool empty = false;
    for (int p = 0; p < pairs; ++p) {
      const int d = x.dim() - 1 - p;
      const int64_t left = padding[2 * p], right = padding[2 * p + 1];
      const int64_t length = x.size(d) - std::max<int64_t>(-left, 0) - std::max<int64_t>(-right, 0);
      empty = empty || length <= 0;
      if (length <= 0) break;
      dst = narrowed(dst, d, std::max<int64_t>(left, 0), length);
      src = narrowed(src, d, std::max<int64_t>(-left, 0), length);
    }
    if (!empty && x.numel() > 0) kernels.copy(dst, src);
  }
  if (should_record({&x})) {
    detail::record(OpKind::Pad, {x}, {out}, PadAttrs{padding, value.to_double()});
  }
  return out;
}

}  // namespace memgrad
