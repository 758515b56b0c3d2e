// Views: every function computes a new layout (sizes, strides in elements, storage offset) over
// the input's storage and hands it to one helper, aliased(), which builds the TensorImpl (through
// unrecorded_view), points view_base at the root base and records the op for autograd; split,
// chunk and unbind build all their pieces first and record them as one op. No view allocates
// device memory; reshape (and flatten, which reshapes) copies through clone() only when no
// strides can express the new shape, exactly when PyTorch does.
#include "engine/views.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/object_pool.h"
#include "engine/copy.h"
#include "engine/error.h"
#include "engine/op_support.h"

namespace memgrad {
namespace {

// The one place a view is made, not recorded: same Storage shared_ptr, view_base = the root base
// (a view of a view aliases the tensor that owns the storage, as in PyTorch), dtype kept. A view
// of a piece of split, chunk or unbind is marked as one too.
Tensor unrecorded_view(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = make_pooled<TensorImpl>(x.impl()->storage_ptr(), sizes, strides, offset, x.dtype());
  impl->set_view_base(x.is_view() ? x.impl()->view_base() : x.impl_ptr());
  if (x.impl()->from_multi_output_view()) impl->mark_from_multi_output_view();
  return Tensor(std::move(impl));
}

Tensor aliased(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset,
               OpKind kind, const OpAttrs& attrs = NoAttrs{}) {
  Tensor out = unrecorded_view(x, sizes, strides, offset);
  if (detail::should_record({&x})) detail::record(kind, {x}, {out}, attrs);
  return out;
}

// The pieces of split, chunk and unbind: marked (autograd refuses in-place ops on them, as
// PyTorch does) and recorded as one op with every piece an output, so backward joins their
// gradients in one allocation (PyTorch's SplitBackward0 and UnbindBackward0).
std::vector<Tensor> multi_output_views(const Tensor& x, std::vector<Tensor> pieces, OpKind kind,
                                       const OpAttrs& attrs) {
  for (const Tensor& p : pieces) p.impl()->mark_from_multi_output_view();
  if (detail::should_record({&x})) detail::record_outputs(kind, x, pieces, attrs);
  return pieces;
}

// The pieces of x along dimension d, of `lengths` elements each, in order.
std::vector<Tensor> split_pieces(const Tensor& x, int d, const std::vector<int64_t>& lengths) {
  std::vector<Tensor> pieces;
  pieces.reserve(lengths.size());
  Shape sizes = x.sizes();
  int64_t start = 0;
  for (int64_t length : lengths) {
    sizes[d] = length;
    pieces.push_back(
        unrecorded_view(x, sizes, x.strides(), x.storage_offset() + start * x.stride(d)));
    start += length;
  }
  return multi_output_views(x, std::move(pieces), OpKind::Split, SplitAttrs{d, lengths});
}

// Ops that need at least one dimension (select, slice, narrow, split, ...).
void check_not_scalar(const char* op, const Tensor& x) {
  if (x.dim() == 0) {
    throw IndexError(fmt::format("[{}] {}() cannot be applied to a 0-dim tensor", op, op), op,
                     {.ndim = 0});
  }
}

// Throws IndexError when (sizes, strides, offset) reaches past the storage of `x`.
void check_in_storage(const char* op, const Tensor& x, const Shape& sizes, const Shape& strides,
                      int64_t offset) {
  if (offset < 0) {
    throw IndexError(fmt::format("[{}] invalid storage offset {}", op, offset), op,
                     {.index = offset});
  }
  if (numel_of(sizes) == 0) return;
  // The highest element the view reaches, in checked arithmetic: a wrapped sum would pass the
  // bounds check and let the view read or write outside its storage.
  int64_t highest = offset;
  bool overflow = false;
  for (int d = 0; d < sizes.size(); ++d) {
    int64_t span = 0;
    overflow = overflow || __builtin_mul_overflow(sizes[d] - 1, strides[d], &span) ||
               __builtin_add_overflow(highest, span, &highest);
  }
  const size_t itemsize = x.element_size();
  size_t required = 0;
  overflow =
      overflow || __builtin_mul_overflow(static_cast<size_t>(highest) + 1, itemsize, &required);
  if (overflow || required > x.storage().nbytes()) {
    const std::string needed = overflow ? "more than 2^64 bytes" : fmt::format("{}", required);
    throw IndexError(fmt::format("[{}] sizes {}, strides {}, storage offset {}, and itemsize {} "
                                 "requiring a storage size "
                                 "of {} are out of bounds for storage of size {}",
                                 op, to_string(sizes), to_string(strides), offset, itemsize, needed,
                                 x.storage().nbytes()),
                     op,
                     {.index = overflow ? std::nullopt : std::optional<int64_t>(highest),
                      .size = static_cast<int64_t>(x.storage().nbytes() / itemsize)});
  }
}

// Sizes and strides of a view over `target` sizes, or a ShapeError from view().
Shape view_strides_or_throw(const Tensor& x, const Shape& target) {
  bool ok = false;
  Shape strides = view_strides(x.sizes(), x.strides(), target, ok);
  if (!ok) {
    throw ShapeError(
        "[view] view size is not compatible with input tensor's size and stride (at least one "
        "dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
        "view", ShapeRoles::wanted(target, x.sizes()));
  }
  return strides;
}

}  // namespace

Tensor make_view(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset) {
  detail::check_defined("make_view", x);
  internal_check(sizes.size() == strides.size(), "make_view: sizes and strides differ in length");
  check_in_storage("make_view", x, sizes, strides, offset);
  return aliased(x, sizes, strides, offset, OpKind::AsStrided,
                 AsStridedAttrs{sizes, strides, offset});
}

// ---- reshaping ----

Tensor view(const Tensor& x, const Shape& sizes) {
  detail::check_defined("view", x);
  const Shape target = infer_size(sizes, x.numel(), "view");
  const Shape strides = view_strides_or_throw(x, target);
  return aliased(x, target, strides, x.storage_offset(), OpKind::View);
}

Tensor reshape(const Tensor& x, const Shape& sizes) {
  detail::check_defined("reshape", x);
  const Shape target = infer_size(sizes, x.numel(), "reshape");
  bool ok = false;
  const Shape strides = view_strides(x.sizes(), x.strides(), target, ok);
  if (ok) return aliased(x, target, strides, x.storage_offset(), OpKind::View);
  // No strides express the new shape: copy (recorded as Clone), then view the copy.
  return view(clone(x), target);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  detail::check_defined("flatten", x);
  const int start = wrap_dim(start_dim, x.dim(), "flatten");
  const int end = wrap_dim(end_dim, x.dim(), "flatten");
  if (start > end) {
    throw IndexError(
        fmt::format("[flatten] start_dim cannot come after end_dim (start_dim {}, end_dim {})",
                    start_dim, end_dim),
        "flatten", {.dim = start_dim, .ndim = x.dim()});
  }
  if (x.dim() == 0) return reshape(x, {1});
  if (start == end) return x;  // PyTorch returns self here, not a new view
  Shape target;
  int64_t merged = 1;
  for (int d = 0; d < x.dim(); ++d) {
    if (d < start || d > end) {
      target.push_back(x.size(d));
    } else {
      merged *= x.size(d);
      if (d == end) target.push_back(merged);
    }
  }
  return reshape(x, target);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  detail::check_defined("unflatten", x);
  const int d = wrap_dim(dim, x.dim(), "unflatten");
  if (sizes.empty())
    throw ShapeError("[unflatten] sizes must be non-empty", "unflatten", ShapeRoles::wanted(sizes));
  const int64_t extent = x.dim() == 0 ? 1 : x.size(d);
  Shape inferred;
  try {
    inferred = infer_size(sizes, extent, "unflatten");
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("[unflatten] provided sizes {} don't multiply up to the size of "
                                 "dim {} ({}) in the input "
                                 "tensor",
                                 to_string(sizes), dim, extent),
                     "unflatten", ShapeRoles::wanted(sizes, x.sizes()));
  }
  Shape target;
  for (int i = 0; i < x.dim(); ++i) {
    if (i != d) {
      target.push_back(x.size(i));
      continue;
    }
    for (int64_t s : inferred) target.push_back(s);
  }
  return view(x, target);
}

// ---- indexing along one dimension ----

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  detail::check_defined("slice", x);
  check_not_scalar("slice", x);
  const int d = wrap_dim(dim, x.dim(), "slice");
  if (step <= 0) {
    throw ValueError(fmt::format("[slice] slice step must be positive, got {}", step), "slice",
                     "step", fmt::format("{}", step));
  }
  // Python slicing: negative bounds count from the end, then both clamp to [0, size].
  const int64_t size = x.size(d);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  // ceil((end - start) / step) without overflow, however large the step.
  sizes[d] = end == start ? 0 : (end - start - 1) / step + 1;
  // stride x step, as PyTorch. With two or more elements step < size, so the product stays
  // within the storage; with one or none the stride never reaches an element, and where the
  // product would not fit an int64 (a step of INT64_MAX) the dimension keeps its stride.
  int64_t stepped = 0;
  if (!__builtin_mul_overflow(strides[d], step, &stepped)) strides[d] = stepped;
  return aliased(x, sizes, strides, x.storage_offset() + start * x.stride(d), OpKind::Slice,
                 SliceAttrs{d, start, step});
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  detail::check_defined("narrow", x);
  check_not_scalar("narrow", x);
  const int d = wrap_dim(dim, x.dim(), "narrow");
  const int64_t size = x.size(d);
  if (start < -size || start > size) {
    throw IndexError(
        fmt::format("[narrow] start out of range (expected to be in range of [{}, {}], but got {})",
                    -size, size, start),
        "narrow", {.index = start, .size = size, .dim = d});
  }
  if (length < 0) {
    throw ValueError(fmt::format("[narrow] length must be non-negative, got {}", length), "narrow",
                     "length", fmt::format("{}", length));
  }
  if (start < 0) start += size;
  if (start > size - length) {
    throw IndexError(fmt::format("[narrow] start ({}) + length ({}) exceeds dimension size ({})",
                                 start, length, size),
                     "narrow", {.index = start, .size = size, .dim = d});
  }
  return slice(x, d, start, start + length, 1);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  detail::check_defined("select", x);
  check_not_scalar("select", x);
  const int d = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.size(d);
  if (index < -size || index >= size) {
    throw IndexError(fmt::format("[select] index {} is out of bounds for dimension {} with size {}",
                                 index, d, size),
                     "select", {.index = index, .size = size, .dim = d});
  }
  if (index < 0) index += size;
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  sizes.erase(d);
  strides.erase(d);
  return aliased(x, sizes, strides, x.storage_offset() + index * x.stride(d), OpKind::Select,
                 SelectAttrs{d, index});
}

// ---- reordering dimensions ----

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  detail::check_defined("transpose", x);
  const int d0 = wrap_dim(dim0, x.dim(), "transpose");
  const int d1 = wrap_dim(dim1, x.dim(), "transpose");
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  if (d0 != d1) {  // equal dims (always so for a 0-d tensor): a plain alias
    std::swap(sizes[d0], sizes[d1]);
    std::swap(strides[d0], strides[d1]);
  }
  return aliased(x, sizes, strides, x.storage_offset(), OpKind::Transpose, TransposeAttrs{d0, d1});
}

Tensor t(const Tensor& x) {
  detail::check_defined("t", x);
  if (x.dim() > 2) {
    throw ShapeError(
        fmt::format("[t] t() expects a tensor with <= 2 dimensions, but self is {}D", x.dim()), "t",
        ShapeRoles::given(x.sizes()));
  }
  return transpose(x, 0, x.dim() < 2 ? 0 : 1);
}

Tensor mT(const Tensor& x) {
  detail::check_defined("mT", x);
  if (x.dim() < 2) {
    throw ShapeError(
        fmt::format(
            "[mT] tensor.mT is only supported on matrices or batches of matrices. Got {}-D tensor.",
            x.dim()),
        "mT", ShapeRoles::given(x.sizes()));
  }
  return transpose(x, -2, -1);
}

Tensor permute(const Tensor& x, const Shape& dims) {
  detail::check_defined("permute", x);
  if (dims.size() != x.dim()) {
    throw ShapeError(
        fmt::format(
            "[permute] number of dims don't match: got dims {} for a tensor with {} dimensions",
            to_string(dims), x.dim()),
        "permute", ShapeRoles::wanted(dims, x.sizes()));
  }
  Shape wrapped;
  Shape sizes;
  Shape strides;
  for (int64_t dim : dims) {
    const int d = wrap_dim(dim, x.dim(), "permute");
    if (std::find(wrapped.begin(), wrapped.end(), d) != wrapped.end()) {
      throw ShapeError(
          fmt::format("[permute] dims {} is not a permutation: dimension {} appears twice",
                      to_string(dims), d),
          "permute", ShapeRoles::wanted(dims, x.sizes()));
    }
    wrapped.push_back(d);
    sizes.push_back(x.size(d));
    strides.push_back(x.stride(d));
  }
  return aliased(x, sizes, strides, x.storage_offset(), OpKind::Permute, PermuteAttrs{wrapped});
}

// ---- broadcasting and size-1 dimensions ----

Tensor expand(const Tensor& x, const Shape& sizes) {
  detail::check_defined("expand", x);
  const int n = sizes.size();
  const int ndim = x.dim();
  if (n < ndim) {
    throw ShapeError(
        fmt::format(
            "[expand] the number of sizes provided ({}) must be greater or equal to the number of "
            "dimensions in the tensor ({})",
            n, ndim),
        "expand", ShapeRoles::wanted(sizes, x.sizes()));
  }
  // PyTorch's inferExpandGeometry, right to left.
  Shape out_sizes = Shape::filled(n, 0);
  Shape out_strides = Shape::filled(n, 0);
  for (int i = n - 1; i >= 0; --i) {
    const int d = i - (n - ndim);
    int64_t size = 1;
    int64_t stride = i + 1 < n ? out_sizes[i + 1] * out_strides[i + 1] : 1;  // a new dimension
    if (d >= 0) {
      size = x.size(d);
      stride = x.stride(d);
    }
    int64_t target = sizes[i];
    if (target == -1) {
      if (d < 0) {
        throw ShapeError(
            fmt::format("[expand] the expanded size of the tensor (-1) isn't allowed in a leading, "
                        "non-existing dimension {}",
                        i),
            "expand", ShapeRoles::wanted(sizes, x.sizes()));
      }
      target = size;
    }
    if (target < 0) {
      throw ShapeError(fmt::format("[expand] invalid size {} in {}", target, to_string(sizes)),
                       "expand", ShapeRoles::wanted(sizes, x.sizes()));
    }
    if (size != target) {
      if (size != 1) {
        throw ShapeError(
            fmt::format("[expand] the expanded size of the tensor ({}) must match the existing "
                        "size ({}) at "
                        "non-singleton dimension {}.  Target sizes: {}.  Tensor sizes: {}",
                        target, size, i, to_string(sizes), to_string(x.sizes())),
            "expand", ShapeRoles::wanted(sizes, x.sizes()));
      }
      size = target;
      stride = 0;
    }
    out_sizes[i] = size;
    out_strides[i] = stride;
  }
  return aliased(x, out_sizes, out_strides, x.storage_offset(), OpKind::Expand);
}

Tensor squeeze(const Tensor& x) {
  detail::check_defined("squeeze", x);
  Shape sizes;
  Shape strides;
  for (int d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 1) continue;
    sizes.push_back(x.size(d));
    strides.push_back(x.stride(d));
  }
  return aliased(x, sizes, strides, x.storage_offset(), OpKind::Squeeze);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  detail::check_defined("squeeze", x);
  const int d = wrap_dim(dim, x.dim(), "squeeze");
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  if (x.dim() > 0 && x.size(d) == 1) {  // a dimension of another size stays (PyTorch)
    sizes.erase(d);
    strides.erase(d);
  }
  return aliased(x, sizes, strides, x.storage_offset(), OpKind::Squeeze);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  detail::check_defined("unsqueeze", x);
  const int d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  // The new dimension's stride is the one that keeps a contiguous tensor contiguous.
  const int64_t stride = d >= x.dim() ? 1 : x.size(d) * x.stride(d);
  sizes.insert(d, 1);
  strides.insert(d, stride);
  return aliased(x, sizes, strides, x.storage_offset(), OpKind::Unsqueeze);
}

// ---- arbitrary geometry ----

Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides,
                  std::optional<int64_t> storage_offset) {
  detail::check_defined("as_strided", x);
  if (sizes.size() != strides.size()) {
    throw ShapeError(fmt::format("[as_strided] mismatch in length of strides and shape: sizes {} "
                                 "and strides {}",
                                 to_string(sizes), to_string(strides)),
                     "as_strided", ShapeRoles::operands(sizes, strides));
  }
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) {
      throw ShapeError(
          fmt::format("[as_strided] negative size {} in {}", sizes[d], to_string(sizes)),
          "as_strided", ShapeRoles::operands(sizes, strides));
    }
    if (strides[d] < 0) {
      throw ShapeError(
          fmt::format("[as_strided] negative strides are not supported, got strides: {}",
                      to_string(strides)),
          "as_strided", ShapeRoles::operands(sizes, strides));
    }
  }
  const int64_t offset = storage_offset.value_or(x.storage_offset());
  check_in_storage("as_strided", x, sizes, strides, offset);
  return aliased(x, sizes, strides, offset, OpKind::AsStrided,
                 AsStridedAttrs{sizes, strides, offset});
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  detail::check_defined("diagonal", x);
  const int d1 = wrap_dim(dim1, x.dim(), "diagonal");
  const int d2 = wrap_dim(dim2, x.dim(), "diagonal");
  if (d1 == d2) {
    throw ShapeError(
        fmt::format("[diagonal] diagonal dimensions cannot be identical {}, {}", dim1, dim2),
        "diagonal", ShapeRoles::given(x.sizes()));
  }
  const int64_t n1 = x.size(d1);
  const int64_t n2 = x.size(d2);
  const int64_t length = offset >= 0 ? std::max<int64_t>(std::min(n1, n2 - offset), 0)
                                     : std::max<int64_t>(std::min(n1 + offset, n2), 0);
  int64_t start = x.storage_offset();
  if (length > 0) start += offset >= 0 ? offset * x.stride(d2) : -offset * x.stride(d1);
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  // Remove the later dimension first so the earlier index stays valid.
  sizes.erase(std::max(d1, d2));
  strides.erase(std::max(d1, d2));
  sizes.erase(std::min(d1, d2));
  strides.erase(std::min(d1, d2));
  sizes.push_back(length);
  strides.push_back(x.stride(d1) + x.stride(d2));
  return aliased(x, sizes, strides, start, OpKind::Diagonal, DiagonalAttrs{offset, d1, d2});
}

// ---- splitting into several views ----

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  detail::check_defined("split", x);
  check_not_scalar("split", x);
  const int d = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.size(d);
  if (split_size < 0) {
    throw ValueError(fmt::format("[split] split_size must be non-negative, got {}", split_size),
                     "split", "split_size", fmt::format("{}", split_size));
  }
  if (split_size == 0 && size != 0) {
    throw ValueError(
        fmt::format(
            "[split] split_size can only be 0 if dimension size is 0, but got dimension size of {}",
            size),
        "split", "split_size", "0");
  }
  const int64_t pieces =
      split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<int64_t> lengths;
  lengths.reserve(static_cast<size_t>(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t start = i * split_size;
    lengths.push_back(std::min(start + split_size, size) - start);
  }
  return split_pieces(x, d, lengths);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  detail::check_defined("split", x);
  check_not_scalar("split", x);
  const int d = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.size(d);
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    if (s < 0) {
      throw ShapeError(
          fmt::format(
              "[split] split_sizes must have only non-negative entries, but got split_sizes={}",
              split_sizes),
          "split", ShapeRoles::given(x.sizes()));
    }
    total += s;
  }
  if (total != size) {
    throw ShapeError(
        fmt::format(
            "[split] split_sizes must sum exactly to {} (input tensor's size at dimension {}), but "
            "got split_sizes={}",
            size, d, split_sizes),
        "split", ShapeRoles::given(x.sizes()));
  }
  return split_pieces(x, d, split_sizes);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  detail::check_defined("chunk", x);
  if (x.dim() == 0) {
    throw IndexError("[chunk] chunk expects at least a 1-dimensional tensor", "chunk",
                     {.dim = dim, .ndim = 0});
  }
  if (chunks <= 0) {
    throw ValueError(fmt::format("[chunk] chunks must be greater than 0, got {}", chunks), "chunk",
                     "chunks", fmt::format("{}", chunks));
  }
  const int d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.size(d);
  const int64_t split_size = (size + chunks - 1) / chunks;
  // An empty dimension still gives `chunks` (empty) pieces, as in PyTorch.
  if (size == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  return split(x, split_size, d);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  detail::check_defined("unbind", x);
  if (x.dim() == 0) {
    throw IndexError("[unbind] dimension specified as 0 but tensor has no dimensions", "unbind",
                     {.dim = dim, .ndim = 0});
  }
  const int d = wrap_dim(dim, x.dim(), "unbind");
  Shape sizes = x.sizes();
  Shape strides = x.strides();
  sizes.erase(d);
  strides.erase(d);
  std::vector<Tensor> pieces;
  pieces.reserve(static_cast<size_t>(x.size(d)));
  for (int64_t i = 0; i < x.size(d); ++i) {
    pieces.push_back(unrecorded_view(x, sizes, strides, x.storage_offset() + i * x.stride(d)));
  }
  return multi_output_views(x, std::move(pieces), OpKind::Unbind, UnbindAttrs{d});
}

}  // namespace memgrad
