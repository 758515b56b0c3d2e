// Tensor: the handle users hold. Copying a Tensor copies a pointer: both handles are the same
// tensor (as in PyTorch); clone() makes a new one.
//
// Every method is defined in tensor.cpp and forwards to a free function of the op front-end
// (elementwise.h, reduce.h, views.h, linalg.h, indexing.h, copy.h, factories.h, ...) whose
// comment states its memory contract:
//   Allocates:  what the call takes from the device's allocator
//   Aliases:    which input's storage the result shares
//   Version:    whether it bumps the storage's version counter
//   Saves:      what autograd keeps for backward when an input requires grad
// The short form used below: views allocate nothing and alias self; out-of-place ops allocate
// their result; in-place ops (trailing underscore) bump the version and allocate nothing, except
// a copy of self where autograd needs the values they overwrite (elementwise.h lists which).
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/scalar.h"
#include "engine/shape.h"
#include "engine/tensor_impl.h"

namespace memgrad {

class Tensor {
 public:
  // An undefined tensor (no storage); defined() is false.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  // The implementation of a defined tensor; throws ValueError naming `method` on an undefined
  // one (a default-constructed Tensor, or a grad() that never arrived).
  TensorImpl& checked(const char* method) const {
    if (impl_ == nullptr) [[unlikely]]
      throw_undefined(method);
    return *impl_;
  }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // Whether both handles are the same tensor (not equal values: see eq / equal).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- layout and metadata (no allocation) ----
  const Shape& sizes() const { return checked("sizes").sizes(); }
  const Shape& shape() const { return checked("shape").sizes(); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  const Shape& strides() const { return checked("strides").strides(); }  // in elements
  int64_t stride(int64_t dim) const;
  int dim() const { return checked("dim").ndim(); }
  int64_t numel() const { return checked("numel").numel(); }
  DType dtype() const { return checked("dtype").dtype(); }
  Device device() const { return checked("device").device(); }
  size_t element_size() const { return memgrad::element_size(dtype()); }
  // numel x element size: the tensor's own bytes (its storage may be larger, e.g. for a view).
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  int64_t storage_offset() const { return checked("storage_offset").storage_offset(); }
  bool is_contiguous() const { return checked("is_contiguous").is_contiguous(); }
  bool is_view() const { return checked("is_view").is_view(); }
  Storage& storage() const { return checked("storage").storage(); }
  bool shares_storage_with(const Tensor& other) const;
  // Address of element [0, ..., 0].
  void* data_ptr() const { return checked("data_ptr").data(); }
  // Typed address; throws DTypeError when T does not match dtype().
  template <typename T>
  T* data_ptr() const;
  // The storage's version counter (PyTorch's tensor._version).
  uint32_t version() const { return checked("version").storage().version(); }

  // The value of a one-element tensor, converted to T. Throws ShapeError otherwise, and
  // DeviceError on a meta device (shapes, no values).
  template <typename T = double>
  T item() const;
  // item<T>(), or `assumed` on a meta device: where a program or an op reads a number it can do
  // without when estimating (a loss to print, a count assumed full), docs/estimate.md.
  template <typename T>
  T item_or(T assumed) const {
    return device().is_meta() ? assumed : item<T>();
  }
  // All values in row-major order, converted to T (copies to the host if needed).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- autograd (needs autograd/ linked; see autograd/ for the details) ----
  bool requires_grad() const { return checked("requires_grad").requires_grad(); }
  // Marks a leaf as requiring grad. Throws AutogradError on a non-leaf or a non-float tensor.
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  // The accumulated gradient of a leaf (or a tensor that called retain_grad()); undefined if
  // none has arrived yet.
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  // "MulBackward", or "" for a leaf.
  std::string grad_fn_name() const;
  // Backpropagates from this tensor. `gradient` is required unless numel() == 1. Frees every
  // saved tensor of the graph as its node runs unless retain_graph.
  void backward(const Tensor& gradient = {}, bool retain_graph = false,
                bool create_graph = false) const;
  void retain_grad() const;
  bool retains_grad() const;
  // Registers `hook` on this tensor's gradient (PyTorch's Tensor.register_hook): during backward
  // it receives the gradient with respect to this tensor, before that gradient is used (a leaf:
  // before it is accumulated into .grad), and may return a replacement (an undefined tensor keeps
  // it). A non-leaf's hook lives as long as its graph node. Throws AutogradError when this tensor
  // does not require grad. Allocates: nothing (the hook allocates what it allocates).
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Registers `hook` to run on a leaf right after a backward has accumulated a gradient into its
  // .grad (PyTorch's register_post_accumulate_grad_hook): the hook receives the leaf itself, and
  // may read, replace or free its .grad. This is where a gradient is ready: data-parallel
  // training starts communicating a gradient here. Throws AutogradError for a non-leaf or a
  // tensor that does not require grad. Allocates: nothing.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  // Aliases self, shares the version counter, has no history. Allocates nothing.
  Tensor detach() const;
  // Drops this tensor's history in place.
  Tensor& detach_();

  // ---- copies and conversions ----
  // A copy in `dtype` (self if already). Allocates: numel x new element size.
  Tensor to(DType dtype) const;
  // A copy on `device` (self if already there). With non_blocking and pinned host memory the
  // copy is asynchronous on CUDA.
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor cpu() const { return to(kCPU); }
  // A new tensor with the same values, contiguous. Allocates: nbytes().
  Tensor clone() const;
  // Self if contiguous, otherwise a contiguous copy. Allocates: nothing or nbytes().
  Tensor contiguous() const;
  // Copies src's values into self (broadcasting src). In-place.
  Tensor& copy_(const Tensor& src);
  // A copy in page-locked host memory (CUDA builds), for asynchronous host-to-device copies.
  Tensor pin_memory() const;
  bool is_pinned() const;

  // ---- views: allocate nothing, alias self ----
  Tensor view(const Shape& sizes) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  // A view when the strides allow it, otherwise a copy (like PyTorch).
  Tensor reshape(const Shape& sizes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  // Elements start, start+step, ... below end along dim (end clamped; negative start/end count
  // from the end).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  // Removes dimension `dim`, keeping index `index` (negative counts from the end).
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;   // 2-d transpose (0-d and 1-d: self)
  Tensor mT() const;  // transpose of the last two dims
  Tensor permute(const Shape& dims) const;
  // Size-1 dims broadcast to `sizes` with stride 0 (-1 keeps a size).
  Tensor expand(const Shape& sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor broadcast_to(const Shape& sizes) const { return expand(sizes); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- elementwise: out-of-place allocate the broadcast result; in-place allocate nothing but
  // the copy of self some need under autograd (elementwise.h) ----
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor add(Scalar other) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(Scalar other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor silu() const;
  Tensor reciprocal() const;
  Tensor square() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor logical_not() const;
  // Comparisons produce bool tensors.
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;

  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& add_(Scalar other);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(Scalar other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& pow_(Scalar exponent);
  Tensor& neg_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& rsqrt_();
  Tensor& abs_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& relu_();
  Tensor& silu_();
  Tensor& reciprocal_();
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& zero_();
  Tensor& fill_(Scalar value);
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  // Fills with U[from, to) / N(mean, std) from the device's generator.
  Tensor& uniform_(double from = 0.0, double to = 1.0);
  Tensor& normal_(double mean = 0.0, double std = 1.0);

  // ---- reductions: allocate the reduced result (dims empty = all dims) ----
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  // (values, indices) along dim; ties pick the first index.
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(const Shape& dims, bool keepdim = false) const;
  Tensor amin(const Shape& dims, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;
  Tensor norm(double p = 2.0, const Shape& dims = {}, bool keepdim = false) const;
  Tensor any() const;
  Tensor all() const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- linear algebra ----
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;

  // ---- indexing ----
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor masked_fill(const Tensor& mask, Scalar value) const;

  // PyTorch-like printing: tensor([[1.0000, 2.0000], ...], device='sim:0', dtype=float64).
  std::string str() const;

 private:
  [[noreturn]] static void throw_undefined(const char* method);
  // The DeviceError of `method` reading the values of a meta tensor.
  [[noreturn]] void throw_no_values(const char* method) const;

  std::shared_ptr<TensorImpl> impl_;
};

// PyTorch-like printing (t.str() and operator<< print the same): "tensor([1., 2.])", with
// device, dtype and grad_fn suffixes where PyTorch prints them. Allocates: a host copy of the
// values (numel x 8 bytes of host memory), freed before return; nothing on the device.
std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Operators: the same as the methods (allocate the result).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

}  // namespace memgrad
