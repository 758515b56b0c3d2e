// Views: values and layouts of every view op, the memory contract (a view adds 0 bytes and
// aliases the root base's storage), writes through views, the copies reshape/contiguous/clone
// make exactly when PyTorch makes them, and every error with its type and message.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/memgrad.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::caught;
using memgrad::testing::check_shape;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

// A float32 tensor holding 0, 1, 2, ... in row-major order; owns its storage (not a view).
Tensor iota(const Shape& sizes, Device device = kCPU) {
  std::vector<float> values(static_cast<size_t>(numel_of(sizes)));
  std::iota(values.begin(), values.end(), 0.0f);
  return from_vector(values, sizes, TensorOptions(device));
}

// Byte distance from base's first element to v's.
int64_t byte_offset(const Tensor& v, const Tensor& base) {
  return static_cast<const char*>(v.data_ptr()) - static_cast<const char*>(base.data_ptr());
}

// The aliasing contract every view satisfies with respect to its (root) base.
void check_aliases(const Tensor& v, const Tensor& base) {
  CHECK(v.is_view());
  CHECK(v.shares_storage_with(base));
  CHECK_EQ(v.impl()->view_base(), base.impl_ptr());
  CHECK_EQ(v.dtype(), base.dtype());
  CHECK_EQ(byte_offset(v, base),
           (v.storage_offset() - base.storage_offset()) * static_cast<int64_t>(v.element_size()));
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("every view op allocates nothing and aliases the base on every device") {
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"view",
       [](const Tensor& x) {
         return x.view({6, 4});
       }},
      {"reshape",
       [](const Tensor& x) {
         return x.reshape({4, -1});
       }},
      {"flatten", [](const Tensor& x) { return x.flatten(); }},
      {"unflatten",
       [](const Tensor& x) {
         return x.unflatten(2, {2, 2});
       }},
      {"slice", [](const Tensor& x) { return x.slice(1, 0, 3, 2); }},
      {"narrow", [](const Tensor& x) { return x.narrow(2, 1, 2); }},
      {"select", [](const Tensor& x) { return x.select(1, 2); }},
      {"transpose", [](const Tensor& x) { return x.transpose(0, 2); }},
      {"mT", [](const Tensor& x) { return x.mT(); }},
      {"permute",
       [](const Tensor& x) {
         return x.permute({2, 0, 1});
       }},
      {"expand",
       [](const Tensor& x) {
         return x.unsqueeze(0).expand({5, 2, 3, 4});
       }},
      {"squeeze", [](const Tensor& x) { return x.unsqueeze(1).squeeze(); }},
      {"unsqueeze", [](const Tensor& x) { return x.unsqueeze(-1); }},
      {"as_strided",
       [](const Tensor& x) {
         return x.as_strided({3, 3}, {1, 1}, 2);
       }},
      {"diagonal", [](const Tensor& x) { return x.diagonal(1, 1, 2); }},
      {"chunk", [](const Tensor& x) { return x.chunk(2, 2)[1]; }},
      {"split",
       [](const Tensor& x) {
         return x.split(std::vector<int64_t>{1, 3}, -1)[1];
       }},
      {"unbind", [](const Tensor& x) { return x.unbind(1)[2]; }},
  };
  for (Device dev : devices_under_test()) {
    const Tensor x = iota({2, 3, 4}, dev);
    for (const auto& [name, op] : ops) {
      CAPTURE(dev.str());
      CAPTURE(name);
      StatsDelta d(allocator_for(dev));
      const Tensor v = op(x);
      CHECK_EQ(d.allocated(), 0);
      CHECK_EQ(d.allocations(), 0);
      check_aliases(v, x);
      CHECK_EQ(v.device(), dev);
    }
  }
}

TEST_CASE("view and reshape of a contiguous tensor share its storage") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({2, 6}, dev);
    const Tensor v = x.view({3, -1});
    check_values(v, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    CHECK_EQ(v.strides(), Shape{4, 1});
    CHECK_EQ(v.storage_offset(), 0);
    CHECK(v.is_contiguous());
    CHECK_EQ(v.data_ptr(), x.data_ptr());
    const Tensor r = x.reshape({12});
    check_values(r, {12}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    check_aliases(r, x);
  }
  const Tensor one = iota({1});
  CHECK_EQ(one.view({}).dim(), 0);
  CHECK_EQ(one.view({}).item<float>(), 0.0f);
}

TEST_CASE("a view of a view points at the root base") {
  const Tensor x = iota({4, 6});
  const Tensor v = x.view({6, 4}).transpose(0, 1).slice(0, 1, 3);
  check_aliases(v, x);
  CHECK_EQ(v.impl()->view_base(), x.impl_ptr());
  check_values(v, {2, 6}, {1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22});
  // A view made from a detached alias still roots at that alias (which owns no view base).
  const Tensor d = x.detach();
  CHECK_FALSE(d.is_view());
  CHECK_EQ(d.view({24}).impl()->view_base(), d.impl_ptr());
}

TEST_CASE("slice counts negative bounds from the end, clamps and steps") {
  const Tensor x = iota({10});
  const Tensor s = x.slice(0, 2, 8, 2);
  check_values(s, {3}, {2, 4, 6});
  CHECK_EQ(s.strides(), Shape{2});
  CHECK_EQ(s.storage_offset(), 2);
  CHECK_EQ(byte_offset(s, x), 2 * 4);
  CHECK_FALSE(s.is_contiguous());
  check_values(x.slice(0, -3, std::numeric_limits<int64_t>::max()), {3}, {7, 8, 9});
  check_values(x.slice(0, -100, 3), {3}, {0, 1, 2});
  check_values(x.slice(0, 8, 100, 3), {1}, {8});
  check_values(x.slice(0, 0, -8), {2}, {0, 1});
  CHECK_EQ(x.slice(0, 5, 2).sizes(), Shape{0});  // end before start: empty, not an error
  CHECK_EQ(x.slice(0, 12, 20).sizes(), Shape{0});
  const Tensor m = iota({3, 4});
  const Tensor cols = m.slice(1, 1, 4, 2);
  check_values(cols, {3, 2}, {1, 3, 5, 7, 9, 11});
  CHECK_EQ(cols.strides(), Shape{4, 2});
  CHECK_EQ(cols.storage_offset(), 1);
  check_values(m.slice(-2, 1, 2), {1, 4}, {4, 5, 6, 7});
  // A step too large for stride x step: one element, and no int64 overflows (size, stride, or
  // the end the backward computes).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Tensor one = ones({5}).slice(0, 0, 5, kMax);
  check_values(one, {1}, {1});
  CHECK_EQ(one.strides(), Shape{kMax});  // 1 x step, as PyTorch
  const Tensor rows = ones({5, 4}).slice(0, 0, 5, kMax / 2);
  CHECK_EQ(rows.sizes(), Shape{1, 4});
  CHECK_EQ(rows.strides(), Shape{4, 1});  // 4 x step does not fit: the stride stays
  CHECK_EQ(x.slice(0, 3, 10, kMax).sizes(), Shape{1});
  CHECK_EQ(x.slice(0, 9, 10, kMax - 1).storage_offset(), 9);
  CHECK_EQ(x.slice(0, 4, 4, kMax).sizes(), Shape{0});
}

TEST_CASE("narrow takes length elements from start") {
  const Tensor m = iota({3, 4});
  const Tensor n = m.narrow(1, 1, 2);
  check_values(n, {3, 2}, {1, 2, 5, 6, 9, 10});
  CHECK_EQ(n.storage_offset(), 1);
  check_values(m.narrow(0, -2, 2), {2, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
  CHECK_EQ(m.narrow(0, 3, 0).sizes(), Shape{0, 4});
}

TEST_CASE("select removes a dimension and wraps negative indices") {
  const Tensor m = iota({3, 4});
  const Tensor row = m[1];
  check_values(row, {4}, {4, 5, 6, 7});
  CHECK_EQ(row.storage_offset(), 4);
  CHECK_EQ(byte_offset(row, m), 16);
  const Tensor col = m.select(1, -1);
  check_values(col, {3}, {3, 7, 11});
  CHECK_EQ(col.strides(), Shape{4});
  CHECK_EQ(col.storage_offset(), 3);
  const Tensor scalar = m[2][3];
  CHECK_EQ(scalar.dim(), 0);
  CHECK_EQ(scalar.item<float>(), 11.0f);
  CHECK_EQ(scalar.storage_offset(), 11);
  check_aliases(scalar, m);
}

TEST_CASE("transpose, t and mT swap sizes and strides") {
  const Tensor m = iota({2, 3});
  const Tensor tr = m.t();
  check_values(tr, {3, 2}, {0, 3, 1, 4, 2, 5});
  CHECK_EQ(tr.strides(), Shape{1, 3});
  CHECK_FALSE(tr.is_contiguous());
  CHECK_EQ(m.transpose(-1, 0).strides(), Shape{1, 3});
  // t() of a 0-d or 1-d tensor is a view with the same layout.
  const Tensor v = iota({3});
  const Tensor vt = v.t();
  check_aliases(vt, v);
  CHECK_EQ(vt.sizes(), Shape{3});
  CHECK_EQ(scalar_tensor(2.0).t().dim(), 0);
  CHECK(m.transpose(1, 1).is_view());
  const Tensor b = iota({2, 3, 4});
  const Tensor bt = b.mT();
  CHECK_EQ(bt.sizes(), Shape{2, 4, 3});
  CHECK_EQ(bt.strides(), Shape{12, 1, 4});
  check_values(bt[1], {4, 3}, {12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23});
}

TEST_CASE("permute reorders dimensions") {
  const Tensor x = iota({2, 3, 4});
  const Tensor p = x.permute({2, 0, 1});
  CHECK_EQ(p.sizes(), Shape{4, 2, 3});
  CHECK_EQ(p.strides(), Shape{1, 12, 4});
  CHECK_EQ(p[1][1][2].item<float>(), x[1][2][1].item<float>());
  check_values(x.permute({-1, 1, 0})[0], {3, 2}, {0, 12, 4, 16, 8, 20});
  CHECK(x.permute({0, 1, 2}).is_contiguous());
}

TEST_CASE("expand broadcasts size-1 dims with stride 0") {
  const Tensor c = iota({3, 1});
  const Tensor e = c.expand({3, 4});
  check_values(e, {3, 4}, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  CHECK_EQ(e.strides(), Shape{1, 0});
  CHECK_EQ(c.expand({-1, 2}).sizes(), Shape{3, 2});
  const Tensor lead = c.expand({2, 3, 4});
  CHECK_EQ(lead.sizes(), Shape{2, 3, 4});
  CHECK_EQ(lead.strides(), Shape{0, 1, 0});
  // A new leading dim of size 1 keeps a stride that preserves contiguity (PyTorch).
  CHECK_EQ(iota({3}).expand({1, 3}).strides(), Shape{3, 1});
  const Tensor s = scalar_tensor(7.0).expand({2, 2});
  check_values(s, {2, 2}, {7, 7, 7, 7});
  CHECK_EQ(s.strides(), Shape{0, 0});
  CHECK_EQ(iota({2}).expand_as(iota({3, 2})).sizes(), Shape{3, 2});
}

TEST_CASE("squeeze and unsqueeze remove and insert size-1 dims") {
  const Tensor x = iota({1, 3, 1});
  CHECK_EQ(x.squeeze().sizes(), Shape{3});
  CHECK_EQ(x.squeeze(0).sizes(), Shape{3, 1});
  CHECK_EQ(x.squeeze(-1).sizes(), Shape{1, 3});
  const Tensor same = x.squeeze(1);  // size 3: unchanged, but still a view
  CHECK_EQ(same.sizes(), Shape{1, 3, 1});
  check_aliases(same, x);
  CHECK_EQ(iota({1}).squeeze().dim(), 0);
  const Tensor m = iota({2, 3});
  CHECK_EQ(m.unsqueeze(0).sizes(), Shape{1, 2, 3});
  CHECK_EQ(m.unsqueeze(0).strides(), Shape{6, 3, 1});
  CHECK_EQ(m.unsqueeze(1).strides(), Shape{3, 3, 1});
  CHECK_EQ(m.unsqueeze(-1).sizes(), Shape{2, 3, 1});
  CHECK_EQ(m.unsqueeze(-1).strides(), Shape{3, 1, 1});
  CHECK(m.unsqueeze(2).is_contiguous());
  CHECK_EQ(scalar_tensor(1.0).unsqueeze(0).sizes(), Shape{1});
  check_values(m.unsqueeze(1), {2, 1, 3}, {0, 1, 2, 3, 4, 5});
}

TEST_CASE("as_strided reads any geometry inside the storage") {
  const Tensor x = iota({9});
  check_values(x.as_strided({3, 3}, {3, 1}), {3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  // Overlapping sliding windows.
  const Tensor w = x.as_strided({3, 3}, {1, 1}, 2);
  check_values(w, {3, 3}, {2, 3, 4, 3, 4, 5, 4, 5, 6});
  CHECK_EQ(w.storage_offset(), 2);
  CHECK_EQ(byte_offset(w, x), 8);
  // Without an offset, a view's own offset is kept; the storage is the root's.
  const Tensor tail = x.slice(0, 5, 9);
  check_values(tail.as_strided({2}, {2}), {2}, {5, 7});
  check_values(tail.as_strided({2}, {1}, 0), {2}, {0, 1});
  check_aliases(tail.as_strided({2}, {1}, 0), x);
  CHECK_EQ(x.as_strided({0, 5}, {100, 100}, 9).numel(), 0);  // no element is read
}

TEST_CASE("diagonal walks stride1 + stride2") {
  const Tensor m = iota({3, 3});
  const Tensor d = m.diagonal();
  check_values(d, {3}, {0, 4, 8});
  CHECK_EQ(d.strides(), Shape{4});
  check_values(m.diagonal(1), {2}, {1, 5});
  CHECK_EQ(m.diagonal(1).storage_offset(), 1);
  check_values(m.diagonal(-1), {2}, {3, 7});
  CHECK_EQ(m.diagonal(-1).storage_offset(), 3);
  CHECK_EQ(m.diagonal(5).sizes(), Shape{0});
  const Tensor b = iota({2, 2, 3});
  check_values(b.diagonal(0, 1, 2), {2, 2}, {0, 4, 6, 10});
  check_values(b.diagonal(0, -1, 0), {2, 2}, {0, 7, 3, 10});
}

TEST_CASE("chunk, split and unbind return views covering the dimension") {
  const Tensor x = iota({10});
  std::vector<Tensor> c = x.chunk(3);
  REQUIRE_EQ(c.size(), 3);
  check_values(c[0], {4}, {0, 1, 2, 3});
  check_values(c[2], {2}, {8, 9});
  CHECK_EQ(c[2].storage_offset(), 8);
  CHECK_EQ(iota({6}).chunk(4).size(), 3);  // like PyTorch: chunks of ceil(6/4) = 2
  CHECK_EQ(iota({0}).chunk(3).size(), 3);
  std::vector<Tensor> s = x.split(4);
  REQUIRE_EQ(s.size(), 3);
  check_values(s[1], {4}, {4, 5, 6, 7});
  check_values(s[2], {2}, {8, 9});
  std::vector<Tensor> parts = x.split(std::vector<int64_t>{2, 3, 5});
  REQUIRE_EQ(parts.size(), 3);
  check_values(parts[1], {3}, {2, 3, 4});
  check_values(parts[2], {5}, {5, 6, 7, 8, 9});
  const Tensor m = iota({2, 3});
  std::vector<Tensor> cols = m.unbind(1);
  REQUIRE_EQ(cols.size(), 3);
  check_values(cols[2], {2}, {2, 5});
  for (const Tensor& t : cols) check_aliases(t, m);
  std::vector<Tensor> rows = m.split(1, 0);
  REQUIRE_EQ(rows.size(), 2);
  check_values(rows[1], {1, 3}, {3, 4, 5});
}

TEST_CASE("flatten and unflatten merge and split dimensions") {
  const Tensor x = iota({2, 3, 4});
  CHECK_EQ(x.flatten().sizes(), Shape{24});
  CHECK_EQ(x.flatten(1).sizes(), Shape{2, 12});
  CHECK_EQ(x.flatten(0, 1).sizes(), Shape{6, 4});
  CHECK(x.flatten(1, 1).is_same(x));  // PyTorch returns self when nothing merges
  CHECK_EQ(scalar_tensor(1.0).flatten().sizes(), Shape{1});
  const Tensor f = iota({2, 12});
  CHECK_EQ(f.unflatten(1, {3, 4}).sizes(), Shape{2, 3, 4});
  CHECK_EQ(f.unflatten(-1, {2, -1}).sizes(), Shape{2, 2, 6});
  check_values(f.unflatten(0, {2, 1})[1][0].slice(0, 0, 3), {3}, {12, 13, 14});
}

TEST_CASE("writing through a view changes the base and bumps the shared version") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    Tensor x = zeros({3, 4}, dev);
    CHECK_EQ(x.version(), 0u);
    Tensor row = x[1];
    row.fill_(5.0);
    check_values(x, {3, 4}, {0, 0, 0, 0, 5, 5, 5, 5, 0, 0, 0, 0});
    CHECK_EQ(x.version(), 1u);
    CHECK_EQ(row.version(), x.version());
    Tensor col = x.t()[3];  // the last column, stride 4
    col.add_(1.0);
    check_values(x, {3, 4}, {0, 0, 0, 1, 5, 5, 5, 6, 0, 0, 0, 1});
    CHECK_EQ(x.version(), 2u);
    Tensor diag = x.diagonal();
    diag.add_(10.0);
    check_values(x, {3, 4}, {10, 0, 0, 1, 5, 15, 5, 6, 0, 0, 10, 1});
    CHECK_EQ(x.version(), 3u);
    CHECK_EQ(diag.version(), 3u);
  }
}

TEST_CASE("reshape copies exactly when no view is possible") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({2, 3}, dev);
    {
      StatsDelta d(allocator_for(dev));
      const Tensor r = x.reshape({3, 2});
      CHECK_EQ(d.allocated(), 0);
      check_aliases(r, x);
    }
    const Tensor tr = x.t();
    StatsDelta d(allocator_for(dev));
    const Tensor r = tr.reshape({6});
    CHECK_EQ(d.allocated(), rounded(6 * sizeof(float)));
    CHECK_EQ(d.allocations(), 1);
    CHECK_FALSE(r.shares_storage_with(x));
    CHECK(r.is_contiguous());
    check_values(r, {6}, {0, 3, 1, 4, 2, 5});
    // flatten reshapes, so it copies in the same case.
    StatsDelta d2(allocator_for(dev));
    const Tensor flat = tr.flatten();
    CHECK_EQ(d2.allocated(), rounded(6 * sizeof(float)));
    check_values(flat, {6}, {0, 3, 1, 4, 2, 5});
    // An expanded tensor cannot be flattened without materialising the copies.
    const Tensor e = iota({3, 1}, dev).expand({3, 4});
    StatsDelta d3(allocator_for(dev));
    check_values(e.reshape({12}), {12}, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
    CHECK_EQ(d3.allocated(), 0);  // the temporary copy is gone again
  }
}

TEST_CASE("contiguous copies only a non-contiguous tensor and clone always copies") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({4, 5}, dev);
    {
      StatsDelta d(allocator_for(dev));
      const Tensor c = x.contiguous();
      CHECK(c.is_same(x));
      CHECK_EQ(d.allocated(), 0);
      CHECK_EQ(d.allocations(), 0);
    }
    const Tensor tr = x.t();
    {
      StatsDelta d(allocator_for(dev));
      const Tensor c = tr.contiguous();
      CHECK_EQ(d.allocated(), rounded(tr.nbytes()));
      CHECK_EQ(d.allocations(), 1);
      CHECK(c.is_contiguous());
      CHECK_FALSE(c.is_view());
      CHECK_FALSE(c.shares_storage_with(x));
      CHECK_EQ(c.strides(), Shape{4, 1});
      check_values(c[1], {4}, {1, 6, 11, 16});
    }
    StatsDelta d(allocator_for(dev));
    const Tensor c = x.clone();
    CHECK_EQ(d.allocated(), rounded(x.nbytes()));
    CHECK_FALSE(c.shares_storage_with(x));
    CHECK_FALSE(c.is_view());
    CHECK_EQ(c.version(), 0u);
  }
}

TEST_CASE("a view keeps the storage alive and the last handle returns it") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    StatsDelta d(allocator_for(dev));
    Tensor x = empty({1000}, dev);
    CHECK_EQ(d.allocated(), rounded(4000));
    Tensor v = x.slice(0, 10, 20);
    x = Tensor();
    CHECK_EQ(d.allocated(), rounded(4000));  // the view still holds the whole storage
    CHECK_EQ(v.numel(), 10);
    v = Tensor();
    CHECK_EQ(d.allocated(), 0);
    CHECK_EQ(d.allocations(), 0);
  }
}

TEST_CASE("views keep the dtype") {
  const Tensor i = arange(6).view({2, 3});
  CHECK_EQ(i.t().dtype(), kInt64);
  CHECK_EQ(i[1][2].item<int64_t>(), 5);
  CHECK_EQ(byte_offset(i[1], i), 3 * 8);
  const Tensor d = arange(4, kFloat64).unsqueeze(0).expand({2, 4});
  CHECK_EQ(d.dtype(), kFloat64);
  check_values(d.diagonal(), {2}, {0, 1});
  const Tensor b = tensor({1, 0, 1}).to(kBool);
  CHECK_EQ(b.slice(0, 1, 3).dtype(), kBool);
  CHECK_EQ(b.slice(0, 1, 3).to_vector<bool>(), std::vector<bool>{false, true});
}

TEST_CASE("view refuses incompatible sizes and strides") {
  const Tensor x = iota({3, 4});
  CHECK_THROWS_WITH_AS(x.view({3, 5}),
                       doctest::Contains("[view] shape [3, 5] is invalid for input of size 12"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("only one dimension can be inferred"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(
      x.t().view({12}),
      doctest::Contains("[view] view size is not compatible with input tensor's size and stride "
                        "(at least one dimension spans across two contiguous subspaces). Use "
                        ".reshape(...) instead."),
      ShapeError);
  CHECK_THROWS_WITH_AS(x.reshape({5, -1}),
                       doctest::Contains("[reshape] shape [5, -1] is invalid for input of size 12"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(x.unflatten(1, {3, 3}),
                       doctest::Contains("[unflatten] provided sizes [3, 3] don't multiply up to "
                                         "the size of dim 1 (4)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(x.flatten(1, 0),
                       doctest::Contains("[flatten] start_dim cannot come after end_dim"),
                       IndexError);
  CHECK_THROWS_WITH_AS(x.flatten(2), doctest::Contains("[flatten] dimension out of range"),
                       IndexError);
}

TEST_CASE("a view the strides cannot express names the tensor's shape and the requested one") {
  const Tensor x = iota({3, 4});
  const auto e = caught<ShapeError>([&] { (void)x.t().view({12}); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "view");
  check_shape(e->expected(), {12}, "expected");
  check_shape(e->actual(), {4, 3}, "actual");
  const auto unflat = caught<ShapeError>([&] { (void)x.unflatten(1, {3, 3}); });
  REQUIRE(unflat);
  CHECK_EQ(unflat->op(), "unflatten");
  check_shape(unflat->expected(), {3, 3}, "expected");
  check_shape(unflat->actual(), {3, 4}, "actual");
}

TEST_CASE("index and dimension errors name the op and the values") {
  const Tensor x = iota({3, 4});
  CHECK_THROWS_WITH_AS(x[5],
                       doctest::Contains("[select] index 5 is out of bounds for dimension 0 with "
                                         "size 3"),
                       IndexError);
  const auto negative = caught<IndexError>([&] { (void)x.select(1, -5); });
  REQUIRE(negative);
  CHECK_EQ(negative->op(), "select");
  CHECK(negative->index() == -5);
  CHECK(negative->size() == 4);
  CHECK(negative->dim() == 1);
  CHECK_THROWS_WITH_AS(
      x.select(2, 0),
      doctest::Contains("[select] dimension out of range (expected to be in range of [-2, 1], "
                        "but got 2)"),
      IndexError);
  const auto of_scalar = caught<IndexError>([] { (void)scalar_tensor(1.0).select(0, 0); });
  REQUIRE(of_scalar);
  CHECK(of_scalar->ndim() == 0);
  CHECK_FALSE(of_scalar->index());
  check_value_error([&] { (void)x.slice(0, 0, 3, 0); }, "slice", "step", "0");
  CHECK_THROWS_AS(x.slice(0, 0, 3, -1), ValueError);
  CHECK_THROWS_WITH_AS(x.slice(-3, 0, 1), doctest::Contains("[slice] dimension out of range"),
                       IndexError);
  CHECK_THROWS_WITH_AS(x.narrow(1, 3, 2),
                       doctest::Contains("[narrow] start (3) + length (2) exceeds dimension size "
                                         "(4)"),
                       IndexError);
  const auto start = caught<IndexError>([&] { (void)x.narrow(1, 5, 0); });
  REQUIRE(start);
  CHECK_EQ(start->op(), "narrow");
  CHECK(start->index() == 5);
  CHECK(start->size() == 4);
  CHECK(start->dim() == 1);
  CHECK_THROWS_AS(x.narrow(1, 0, -1), ValueError);
  CHECK_THROWS_WITH_AS(x.transpose(0, 2), doctest::Contains("[transpose] dimension out of range"),
                       IndexError);
  CHECK_THROWS_WITH_AS(x.unsqueeze(3),
                       doctest::Contains("[unsqueeze] dimension out of range (expected to be in "
                                         "range of [-3, 2], but got 3)"),
                       IndexError);
  CHECK_THROWS_WITH_AS(x.squeeze(-3), doctest::Contains("[squeeze] dimension out of range"),
                       IndexError);
  const auto unbind_dim = caught<IndexError>([&] { (void)x.unbind(2); });
  REQUIRE(unbind_dim);
  CHECK_EQ(unbind_dim->op(), "unbind");
  CHECK(unbind_dim->dim() == 2);
  CHECK(unbind_dim->ndim() == 2);
}

TEST_CASE("shape errors of t, mT, permute, expand, diagonal and split") {
  const Tensor x = iota({2, 3, 4});
  CHECK_THROWS_WITH_AS(x.t(),
                       doctest::Contains("[t] t() expects a tensor with <= 2 dimensions, but "
                                         "self is 3D"),
                       ShapeError);
  const auto mt = caught<ShapeError>([] { (void)iota({3}).mT(); });
  REQUIRE(mt);
  CHECK_EQ(mt->op(), "mT");
  check_shape(mt->actual(), {3}, "actual");
  const auto permute_dims = caught<ShapeError>([&] { (void)x.permute({0, 1}); });
  REQUIRE(permute_dims);
  CHECK_EQ(permute_dims->op(), "permute");
  check_shape(permute_dims->expected(), {0, 1}, "expected");
  check_shape(permute_dims->actual(), {2, 3, 4}, "actual");
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 1}),
                       doctest::Contains("[permute] dims [0, 1, 1] is not a permutation"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, -4}), doctest::Contains("[permute] dimension out of range"),
                       IndexError);
  CHECK_THROWS_WITH_AS(
      iota({3, 1}).expand({4, 4}),
      doctest::Contains("[expand] the expanded size of the tensor (4) must match the existing "
                        "size (3) at non-singleton dimension 0.  Target sizes: [4, 4].  Tensor "
                        "sizes: [3, 1]"),
      ShapeError);
  CHECK_THROWS_WITH_AS(iota({3, 1}).expand({4}),
                       doctest::Contains("[expand] the number of sizes provided (1) must be "
                                         "greater or equal to the number of dimensions in the "
                                         "tensor (2)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(iota({3}).expand({-1, 3}),
                       doctest::Contains("isn't allowed in a leading, non-existing dimension 0"),
                       ShapeError);
  const auto expand_sizes = caught<ShapeError>([] { (void)iota({3, 1}).expand({4}); });
  REQUIRE(expand_sizes);
  CHECK_EQ(expand_sizes->op(), "expand");
  check_shape(expand_sizes->expected(), {4}, "expected");
  check_shape(expand_sizes->actual(), {3, 1}, "actual");
  CHECK_THROWS_WITH_AS(x.diagonal(0, 1, -2),
                       doctest::Contains("[diagonal] diagonal dimensions cannot be identical"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(iota({10}).split(std::vector<int64_t>{3, 3}),
                       doctest::Contains("[split] split_sizes must sum exactly to 10 (input "
                                         "tensor's size at dimension 0), but got "
                                         "split_sizes=[3, 3]"),
                       ShapeError);
  CHECK_THROWS_AS(iota({10}).split(std::vector<int64_t>{-1, 11}), ShapeError);
  check_value_error([] { (void)iota({10}).split(0); }, "split", "split_size", "0");
  check_value_error([] { (void)iota({10}).chunk(0); }, "chunk", "chunks", "0");
  CHECK_THROWS_AS(scalar_tensor(1.0).unbind(), IndexError);
}

TEST_CASE("as_strided refuses geometry outside the storage") {
  const Tensor x = iota({9});
  CHECK_THROWS_WITH_AS(x.as_strided({3, 3}, {3, 1}, 1),
                       doctest::Contains("[as_strided] sizes [3, 3], strides [3, 1], storage "
                                         "offset 1, and itemsize 4 requiring a storage size of "
                                         "40 are out of bounds for storage of size 36"),
                       IndexError);
  // The fields: the highest element the view reaches and the storage's size, in elements.
  const auto past_end = caught<IndexError>([&] { (void)x.as_strided({4, 3}, {3, 1}); });
  REQUIRE(past_end);
  CHECK_EQ(past_end->op(), "as_strided");
  CHECK(past_end->index() == 11);
  CHECK(past_end->size() == 9);
  // A view's default offset counts: 5 + 4 elements is past the 9 of the storage.
  CHECK_THROWS_AS(x.slice(0, 5, 9).as_strided({5}, {1}), IndexError);
  CHECK_THROWS_WITH_AS(x.as_strided({3}, {1}, -1),
                       doctest::Contains("[as_strided] invalid storage offset -1"), IndexError);
  CHECK_THROWS_WITH_AS(x.as_strided({3, 3}, {1}),
                       doctest::Contains("[as_strided] mismatch in length of strides and shape"),
                       ShapeError);
  CHECK_THROWS_AS(x.as_strided({3}, {-1}), ShapeError);
}

}  // TEST_SUITE("engine")
