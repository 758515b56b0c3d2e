// Tensor methods: every member function of Tensor is defined here, as a thin forward to the op
// front-end (or, for the autograd half, through the seam).
#include "engine/tensor.h"

#include <fmt/format.h>

#include "base/object_pool.h"
#include "engine/autograd_seam.h"
#include "engine/copy.h"
#include "engine/elementwise.h"
#include "engine/error.h"
#include "engine/factories.h"
#include "engine/indexing.h"
#include "engine/linalg.h"
#include "engine/reduce.h"
#include "engine/views.h"

namespace memgrad {
namespace {

AutogradSeam& seam(const char* what) {
  AutogradSeam* s = autograd_seam();
  if (s == nullptr) {
    throw Error(
        fmt::format("[{}] autograd is not linked into this program (link memgrad, not "
                    "only its engine layer)",
                    what));
  }
  return *s;
}

}  // namespace

// ---- metadata ----

void Tensor::throw_undefined(const char* method) {
  throw ValueError(fmt::format("[{}] called on an undefined tensor (a default-constructed Tensor, "
                               "or the grad() of a tensor that has received none)",
                               method),
                   method, "self");
}

void Tensor::throw_no_values(const char* method) const {
  throw DeviceError(fmt::format("[{}] a tensor on {} has a shape ({}) but no values: an op whose "
                                "result depends on values cannot run there",
                                method, device().str(), to_string(sizes())),
                    method, {device().str()});
}

int64_t Tensor::size(int64_t dim) const { return sizes()[wrap_dim(dim, this->dim(), "size")]; }

int64_t Tensor::stride(int64_t dim) const {
  return strides()[wrap_dim(dim, this->dim(), "stride")];
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage_ptr() == other.impl_->storage_ptr();
}

template <typename T>
T* Tensor::data_ptr() const {
  if (dtype() != dtype_of<T>()) {
    throw DTypeError(fmt::format("[data_ptr] tensor has dtype {} but {} was requested",
                                 dtype_name(dtype()), dtype_name(dtype_of<T>())),
                     "data_ptr", {dtype(), dtype_of<T>()});
  }
  return static_cast<T*>(checked("data_ptr").data());
}

template <typename T>
T Tensor::item() const {
  if (numel() != 1) {
    throw ShapeError(fmt::format("[item] a tensor with {} elements cannot be converted to a "
                                 "number (shape {})",
                                 numel(), to_string(sizes())),
                     "item", ShapeRoles::given(sizes()));
  }
  if (device().is_meta()) throw_no_values("item");
  return to_vector<T>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  // Convert on the tensor's device into a contiguous tensor of T's dtype, then read the host.
  constexpr DType target = [] {
    if constexpr (std::is_same_v<T, int>) {
      return DType::Int64;
    } else {
      return dtype_of<T>();
    }
  }();
  if (device().is_meta()) throw_no_values("to_vector");
  Tensor host = to(kCPU).to(target).contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, int>) {
    const int64_t* p = static_cast<const int64_t*>(host.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int>(p[i]);
  } else if constexpr (std::is_same_v<T, bool>) {
    const bool* p = static_cast<const bool*>(host.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else {
    const T* p = static_cast<const T*>(host.data_ptr());
    std::copy(p, p + out.size(), out.begin());
  }
  return out;
}

template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template Half* Tensor::data_ptr<Half>() const;
template BFloat16* Tensor::data_ptr<BFloat16>() const;
template int64_t* Tensor::data_ptr<int64_t>() const;
template bool* Tensor::data_ptr<bool>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template int Tensor::item<int>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<int> Tensor::to_vector<int>() const;

// ---- autograd ----

Tensor& Tensor::requires_grad_(bool requires_grad) {
  seam("requires_grad_").set_requires_grad(*this, requires_grad);
  return *this;
}
bool Tensor::is_leaf() const {
  AutogradSeam* s = autograd_seam();
  return s == nullptr || s->is_leaf(*this);
}
Tensor Tensor::grad() const {
  AutogradSeam* s = autograd_seam();
  return s == nullptr ? Tensor() : s->grad(*this);
}
void Tensor::set_grad(const Tensor& grad) const { seam("set_grad").set_grad(*this, grad); }
std::string Tensor::grad_fn_name() const {
  AutogradSeam* s = autograd_seam();
  return s == nullptr ? std::string() : s->grad_fn_name(*this);
}
void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  seam("backward").backward(*this, gradient, retain_graph, create_graph);
}
void Tensor::retain_grad() const { seam("retain_grad").retain_grad(*this); }
void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  seam("register_hook").register_hook(*this, std::move(hook));
}
void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  seam("register_post_accumulate_grad_hook")
      .register_post_accumulate_grad_hook(*this, std::move(hook));
}
bool Tensor::retains_grad() const {
  AutogradSeam* s = autograd_seam();
  return s != nullptr && s->retains_grad(*this);
}
Tensor Tensor::detach() const {
  // Same storage (so the same version counter), no autograd metadata: no history.
  return Tensor(make_pooled<TensorImpl>(checked("detach").storage_ptr(), sizes(), strides(),
                                        storage_offset(), dtype()));
}
Tensor& Tensor::detach_() {
  if (AutogradSeam* s = autograd_seam()) s->detach_(*this);
  return *this;
}

// ---- copies and conversions ----

Tensor Tensor::to(DType dtype) const { return to_dtype(*this, dtype); }
Tensor Tensor::to(Device device, bool non_blocking) const {
  return to_device(*this, device, non_blocking);
}
Tensor Tensor::clone() const { return memgrad::clone(*this); }
Tensor Tensor::contiguous() const { return memgrad::contiguous(*this); }
Tensor& Tensor::copy_(const Tensor& src) { return memgrad::copy_(*this, src); }
Tensor Tensor::pin_memory() const { return memgrad::pin_memory(*this); }
bool Tensor::is_pinned() const { return memgrad::is_pinned(*this); }

// ---- views ----

Tensor Tensor::view(const Shape& s) const { return memgrad::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return memgrad::reshape(*this, s); }
Tensor Tensor::flatten(int64_t start, int64_t end) const {
  return memgrad::flatten(*this, start, end);
}
Tensor Tensor::unflatten(int64_t dim, const Shape& s) const {
  return memgrad::unflatten(*this, dim, s);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return memgrad::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return memgrad::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int64_t dim, int64_t index) const {
  return memgrad::select(*this, dim, index);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return memgrad::transpose(*this, d0, d1); }
Tensor Tensor::t() const { return memgrad::t(*this); }
Tensor Tensor::mT() const { return memgrad::mT(*this); }
Tensor Tensor::permute(const Shape& dims) const { return memgrad::permute(*this, dims); }
Tensor Tensor::expand(const Shape& s) const { return memgrad::expand(*this, s); }
Tensor Tensor::squeeze() const { return memgrad::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return memgrad::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return memgrad::unsqueeze(*this, dim); }
Tensor Tensor::as_strided(const Shape& s, const Shape& st, std::optional<int64_t> offset) const {
  return memgrad::as_strided(*this, s, st, offset);
}
Tensor Tensor::diagonal(int64_t offset, int64_t d1, int64_t d2) const {
  return memgrad::diagonal(*this, offset, d1, d2);
}
std::vector<Tensor> Tensor::chunk(int64_t n, int64_t dim) const {
  return memgrad::chunk(*this, n, dim);
}
std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const {
  return memgrad::split(*this, size, dim);
}
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t dim) const {
  return memgrad::split(*this, sizes, dim);
}
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return memgrad::unbind(*this, dim); }

// ---- elementwise ----

Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return memgrad::add(*this, o, alpha); }
Tensor Tensor::add(Scalar o) const { return memgrad::add(*this, o); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return memgrad::sub(*this, o, alpha); }
Tensor Tensor::sub(Scalar o) const { return memgrad::add(*this, o.negated()); }
Tensor Tensor::mul(const Tensor& o) const { return memgrad::mul(*this, o); }
Tensor Tensor::mul(Scalar o) const { return memgrad::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return memgrad::div(*this, o); }
Tensor Tensor::div(Scalar o) const { return memgrad::div(*this, o); }
Tensor Tensor::pow(const Tensor& e) const { return memgrad::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return memgrad::pow(*this, e); }
Tensor Tensor::neg() const { return memgrad::neg(*this); }
Tensor Tensor::exp() const { return memgrad::exp(*this); }
Tensor Tensor::log() const { return memgrad::log(*this); }
Tensor Tensor::sqrt() const { return memgrad::sqrt(*this); }
Tensor Tensor::rsqrt() const { return memgrad::rsqrt(*this); }
Tensor Tensor::abs() const { return memgrad::abs(*this); }
Tensor Tensor::sign() const { return memgrad::sign(*this); }
Tensor Tensor::tanh() const { return memgrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return memgrad::sigmoid(*this); }
Tensor Tensor::relu() const { return memgrad::relu(*this); }
Tensor Tensor::gelu(bool approx) const { return memgrad::gelu(*this, approx); }
Tensor Tensor::silu() const { return memgrad::silu(*this); }
Tensor Tensor::reciprocal() const { return memgrad::reciprocal(*this); }
Tensor Tensor::square() const { return memgrad::square(*this); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return memgrad::clamp(*this, lo, hi);
}
Tensor Tensor::maximum(const Tensor& o) const { return memgrad::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return memgrad::minimum(*this, o); }
Tensor Tensor::logical_not() const { return memgrad::logical_not(*this); }
Tensor Tensor::eq(const Tensor& o) const { return memgrad::eq(*this, o); }
Tensor Tensor::eq(Scalar o) const { return memgrad::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return memgrad::ne(*this, o); }
Tensor Tensor::ne(Scalar o) const { return memgrad::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return memgrad::lt(*this, o); }
Tensor Tensor::lt(Scalar o) const { return memgrad::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return memgrad::le(*this, o); }
Tensor Tensor::le(Scalar o) const { return memgrad::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return memgrad::gt(*this, o); }
Tensor Tensor::gt(Scalar o) const { return memgrad::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return memgrad::ge(*this, o); }
Tensor Tensor::ge(Scalar o) const { return memgrad::ge(*this, o); }

// ---- in place ----

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) { return memgrad::add_(*this, o, alpha); }
Tensor& Tensor::add_(Scalar o) { return memgrad::add_(*this, o); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) { return memgrad::sub_(*this, o, alpha); }
Tensor& Tensor::sub_(Scalar o) { return memgrad::sub_(*this, o); }
Tensor& Tensor::mul_(const Tensor& o) { return memgrad::mul_(*this, o); }
Tensor& Tensor::mul_(Scalar o) { return memgrad::mul_(*this, o); }
Tensor& Tensor::div_(const Tensor& o) { return memgrad::div_(*this, o); }
Tensor& Tensor::div_(Scalar o) { return memgrad::div_(*this, o); }
Tensor& Tensor::pow_(Scalar e) { return memgrad::pow_(*this, e); }
Tensor& Tensor::neg_() { return memgrad::neg_(*this); }
Tensor& Tensor::exp_() { return memgrad::exp_(*this); }
Tensor& Tensor::log_() { return memgrad::log_(*this); }
Tensor& Tensor::sqrt_() { return memgrad::sqrt_(*this); }
Tensor& Tensor::rsqrt_() { return memgrad::rsqrt_(*this); }
Tensor& Tensor::abs_() { return memgrad::abs_(*this); }
Tensor& Tensor::tanh_() { return memgrad::tanh_(*this); }
Tensor& Tensor::sigmoid_() { return memgrad::sigmoid_(*this); }
Tensor& Tensor::relu_() { return memgrad::relu_(*this); }
Tensor& Tensor::silu_() { return memgrad::silu_(*this); }
Tensor& Tensor::reciprocal_() { return memgrad::reciprocal_(*this); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return memgrad::clamp_(*this, lo, hi);
}
Tensor& Tensor::zero_() { return memgrad::zero_(*this); }
Tensor& Tensor::fill_(Scalar value) { return memgrad::fill_(*this, value); }
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  return memgrad::masked_fill_(*this, mask, value);
}
Tensor& Tensor::uniform_(double from, double to) { return memgrad::uniform_(*this, from, to); }
Tensor& Tensor::normal_(double mean, double std) { return memgrad::normal_(*this, mean, std); }

// ---- reductions ----

Tensor Tensor::sum(std::optional<DType> dtype) const {
  return memgrad::sum(*this, {}, false, dtype);
}
Tensor Tensor::sum(const Shape& dims, bool keepdim) const {
  return memgrad::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const { return memgrad::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const {
  return memgrad::mean(*this, dims, keepdim);
}
Tensor Tensor::var(const Shape& dims, int64_t c, bool keepdim) const {
  return memgrad::var(*this, dims, c, keepdim);
}
Tensor Tensor::std(const Shape& dims, int64_t c, bool keepdim) const {
  return memgrad::std(*this, dims, c, keepdim);
}
Tensor Tensor::max() const { return memgrad::max(*this); }
Tensor Tensor::min() const { return memgrad::min(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return memgrad::max(*this, dim, keepdim);
}
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return memgrad::min(*this, dim, keepdim);
}
Tensor Tensor::amax(const Shape& dims, bool keepdim) const {
  return memgrad::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const Shape& dims, bool keepdim) const {
  return memgrad::amin(*this, dims, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return memgrad::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return memgrad::argmin(*this, dim, keepdim);
}
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const {
  return memgrad::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const {
  return memgrad::norm(*this, p, dims, keepdim);
}
Tensor Tensor::any() const { return memgrad::any(*this); }
Tensor Tensor::all() const { return memgrad::all(*this); }
Tensor Tensor::softmax(int64_t dim) const { return memgrad::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return memgrad::log_softmax(*this, dim); }

// ---- linear algebra and indexing ----

Tensor Tensor::matmul(const Tensor& o) const { return memgrad::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return memgrad::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return memgrad::bmm(*this, o); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return memgrad::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return memgrad::gather(*this, dim, index);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return memgrad::scatter_add(*this, dim, index, src);
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  return memgrad::scatter_add_(*this, dim, index, src);
}
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  return memgrad::masked_fill(*this, mask, value);
}

// ---- printing ----

std::string Tensor::str() const { return memgrad::to_string(*this); }

// ---- operators ----

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return add(a, b.negated()); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

}  // namespace memgrad
