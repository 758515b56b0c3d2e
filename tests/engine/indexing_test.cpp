// Index ops and joining: values against hand-computed results, duplicate and bad indices,
// broadcast masks, and the single allocation of each result (none for in-place forms).
#include <doctest/doctest.h>

#include <vector>

#include "engine/memgrad.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::allocations_made;
using memgrad::testing::caught;
using memgrad::testing::check_device_error;
using memgrad::testing::check_dtypes;
using memgrad::testing::check_shape;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

// Row-major values 0, 1, 2, ... shaped `sizes` (float32).
Tensor iota(const Shape& sizes, Device dev) {
  return arange(numel_of(sizes), TensorOptions(kFloat32).with_device(dev)).view(sizes);
}

Tensor ints(std::initializer_list<int64_t> values, Device dev, const Shape& sizes = {}) {
  const std::vector<int64_t> v(values);
  return from_vector(v, sizes.empty() ? Shape{static_cast<int64_t>(v.size())} : sizes,
                     TensorOptions(kInt64).with_device(dev));
}

Tensor bools(std::initializer_list<int> values, Device dev, const Shape& sizes) {
  std::vector<double> v(values.begin(), values.end());
  return from_vector(v, sizes, TensorOptions(kFloat64).with_device(dev)).to(kBool);
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("index_select picks rows or columns, repeating duplicates") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({3, 4}, dev);  // [0 1 2 3; 4 5 6 7; 8 9 10 11]
    const Tensor idx = ints({2, 0, 2}, dev);
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor rows = index_select(x, 0, idx);
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_EQ(d.allocated(), rounded(12 * sizeof(float)));
    check_values(rows, {3, 4}, {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
    check_values(x.index_select(1, idx), {3, 3}, {2, 0, 2, 6, 4, 6, 10, 8, 10});
    check_values(x.index_select(-1, ints({3}, dev)), {3, 1}, {3, 7, 11});
    // A transposed input and an empty index.
    check_values(x.t().index_select(0, ints({1}, dev)), {1, 3}, {1, 5, 9});
    check_values(x.index_select(0, ints({}, dev, {0})), {0, 4}, {});
  }
}

TEST_CASE("index_select rejects out-of-range and negative indices") {
  const Tensor x = iota({5, 2}, kCPU);
  CHECK_THROWS_WITH_AS(index_select(x, 0, ints({1, 7, 9}, kCPU)),
                       doctest::Contains("[index_select] index 7 is out of range for dimension 0 "
                                         "with size 5 (at position 1"),
                       IndexError);
  // The fields: the bad index, the size it must fall within, the dim, and its position.
  const auto e = caught<IndexError>([&] { (void)index_select(x, 0, ints({1, 7, 9}, kCPU)); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "index_select");
  CHECK(e->index() == 7);
  CHECK(e->size() == 5);
  CHECK(e->dim() == 0);
  CHECK(e->position() == 1);
  const auto negative = caught<IndexError>([&] { (void)index_select(x, 0, ints({-1}, kCPU)); });
  REQUIRE(negative);
  CHECK(negative->index() == -1);
  CHECK(negative->position() == 0);
  CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({1.0})),
                       doctest::Contains("[index_select] index must be an int64 tensor, got "
                                         "float32"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(index_select(x, 0, ints({0, 1}, kCPU, {1, 2})),
                       doctest::Contains("[index_select] index must be a 0-D or 1-D tensor"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(index_select(x, 2, ints({0}, kCPU)),
                       doctest::Contains("[index_select] dimension out of range"), IndexError);
  check_device_error([&] { (void)index_select(x, 0, ints({0}, Device("sim:0"))); }, "index_select",
                     {"cpu", "sim:0"});
}

TEST_CASE("gather reads along a dim at per-element indices") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({2, 3}, dev);  // [0 1 2; 3 4 5]
    // dim 1: out[i][j] = x[i][idx[i][j]]
    check_values(gather(x, 1, ints({2, 2, 0, 1}, dev, {2, 2})), {2, 2}, {2, 2, 3, 4});
    // dim 0: out[i][j] = x[idx[i][j]][j]; the index may be smaller than x.
    check_values(x.gather(0, ints({1, 0}, dev, {1, 2})), {1, 2}, {3, 1});
    // Strided (transposed) input: x.t() = [0 3; 1 4; 2 5].
    check_values(x.t().gather(1, ints({1, 0, 1}, dev, {3, 1})), {3, 1}, {3, 1, 5});
    StatsDelta d(allocator_for(dev));
    const Tensor idx = ints({0, 1, 1, 0, 0, 0}, dev, {2, 3});
    const int64_t before = allocations_made(dev);
    const Tensor g = gather(x, 0, idx);
    CHECK_EQ(allocations_made(dev) - before, 1);
    check_values(g, {2, 3}, {0, 4, 5, 0, 1, 2});
  }
}

TEST_CASE("gather validates indices and shapes") {
  const Tensor x = iota({2, 3}, kCPU);
  CHECK_THROWS_WITH_AS(gather(x, 1, ints({0, 3}, kCPU, {1, 2})),
                       doctest::Contains("[gather] index 3 is out of range for dimension 1 with "
                                         "size 3"),
                       IndexError);
  const auto negative = caught<IndexError>([&] {
    (void)gather(x, 1, ints({0, -2}, kCPU, {1, 2}));
  });
  REQUIRE(negative);
  CHECK_EQ(negative->op(), "gather");
  CHECK(negative->index() == -2);
  CHECK(negative->size() == 3);
  CHECK(negative->dim() == 1);
  CHECK(negative->position() == 1);
  CHECK_THROWS_WITH_AS(gather(x, 1, ints({0, 1}, kCPU)),
                       doctest::Contains("[gather] index (shape [2]) must have the same number of "
                                         "dimensions as self (shape [2, 3])"),
                       ShapeError);
  const auto ndim = caught<ShapeError>([&] { (void)gather(x, 1, ints({0, 1}, kCPU)); });
  REQUIRE(ndim);
  check_shape(ndim->lhs(), {2}, "lhs");
  check_shape(ndim->rhs(), {2, 3}, "rhs");
  CHECK_THROWS_WITH_AS(gather(x, 1, ints({0, 0, 0}, kCPU, {3, 1})),
                       doctest::Contains("[gather] index of shape [3, 1] is larger than self of "
                                         "shape [2, 3] at dimension 0"),
                       ShapeError);
}

TEST_CASE("scatter_add accumulates duplicate indices") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor self = zeros({2, 4}, dev);
    const Tensor src = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, dev);
    const Tensor idx = ints({1, 1, 3, 0, 0, 0}, dev, {2, 3});
    const int64_t before = allocations_made(dev);
    const Tensor out = scatter_add(self, 1, idx, src);
    CHECK_EQ(allocations_made(dev) - before, 1);
    // Row 0: 1 + 2 at column 1, 3 at column 3; row 1: 4 + 5 + 6 at column 0.
    check_values(out, {2, 4}, {0, 3, 0, 3, 15, 0, 0, 0});
    check_values(self, {2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});  // out-of-place left self alone
    // Along dim 0 with a smaller index and src.
    check_values(zeros({3}, dev).scatter_add(0, ints({2, 2, 0}, dev), tensor({1.0, 2.0, 4.0}, dev)),
                 {3}, {4, 0, 3});
  }
}

TEST_CASE("scatter_add_ writes in place, bumps the version once and allocates nothing") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    Tensor self = ones({4}, dev);
    const Tensor idx = ints({3, 3, 0}, dev);
    const Tensor src = tensor({1.0, 1.0, 5.0}, dev);
    const uint32_t version = self.version();
    const int64_t before = allocations_made(dev);
    Tensor& r = self.scatter_add_(0, idx, src);
    CHECK_EQ(allocations_made(dev) - before, 0);
    CHECK(r.is_same(self));
    CHECK_EQ(self.version(), version + 1);
    check_values(self, {4}, {6, 1, 1, 3});
    // A bad index writes nothing and leaves the version alone.
    CHECK_THROWS_WITH_AS(scatter_add_(self, 0, ints({0, 4}, dev), tensor({1.0, 1.0}, dev)),
                         doctest::Contains("[scatter_add_] index 4 is out of range for dimension "
                                           "0 with size 4 (at position 1"),
                         IndexError);
    CHECK_EQ(self.version(), version + 1);
    check_values(self, {4}, {6, 1, 1, 3});
  }
  Tensor f = zeros({3});
  CHECK_THROWS_WITH_AS(scatter_add_(f, 0, ints({0}, kCPU), tensor({1.0}, kFloat64)),
                       doctest::Contains("[scatter_add_] self and src must have the same dtype, "
                                         "got float32 and float64"),
                       DTypeError);
  const auto mixed =
      caught<DTypeError>([&] { scatter_add_(f, 0, ints({0}, kCPU), tensor({1.0}, kFloat64)); });
  REQUIRE(mixed);
  CHECK_EQ(mixed->op(), "scatter_add_");
  check_dtypes(mixed->dtypes(), {kFloat32, kFloat64});
  CHECK_THROWS_WITH_AS(scatter_add_(f, 0, ints({0, 1}, kCPU), tensor({1.0})),
                       doctest::Contains("[scatter_add_] index of shape [2] is larger than src of "
                                         "shape [1] at dimension 0"),
                       ShapeError);
  const auto larger = caught<ShapeError>([&] {
    scatter_add_(f, 0, ints({0, 1}, kCPU), tensor({1.0}));
  });
  REQUIRE(larger);
  check_shape(larger->lhs(), {2}, "lhs");
  check_shape(larger->rhs(), {1}, "rhs");
}

TEST_CASE("embedding looks up rows for indices of any shape") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor weight = iota({4, 3}, dev);  // row r: 3r, 3r+1, 3r+2
    const Tensor idx = ints({3, 0, 3, 1}, dev, {2, 2});
    const int64_t before = allocations_made(dev);
    const Tensor e = embedding(weight, idx);
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_FALSE(e.is_view());
    check_values(e, {2, 2, 3}, {9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5});
    // Non-contiguous indices (a transposed view) give the same lookups in their order.
    check_values(embedding(weight, idx.t()), {2, 2, 3}, {9, 10, 11, 9, 10, 11, 0, 1, 2, 3, 4, 5});
    CHECK_THROWS_WITH_AS(embedding(weight, ints({4}, dev)),
                         doctest::Contains("[embedding] index 4 is out of range for dimension 0 "
                                           "with size 4"),
                         IndexError);
  }
  CHECK_THROWS_WITH_AS(embedding(zeros({4}), ints({0}, kCPU)),
                       doctest::Contains("[embedding] weight must be 2-D"), ShapeError);
  CHECK_THROWS_WITH_AS(embedding(zeros({4, 2}), tensor({0.0})),
                       doctest::Contains("[embedding] indices must be an int64 tensor"),
                       DTypeError);
}

TEST_CASE("masked_fill broadcasts the mask") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({2, 3}, dev);
    const Tensor row_mask = bools({1, 0, 1}, dev, {3});
    StatsDelta d(allocator_for(dev));
    const Tensor y = masked_fill(x, row_mask, -1.0);
    CHECK_EQ(d.allocations(), 1);
    check_values(y, {2, 3}, {-1, 1, -1, -1, 4, -1});
    check_values(x, {2, 3}, {0, 1, 2, 3, 4, 5});
    const Tensor col_mask = bools({0, 1}, dev, {2, 1});
    check_values(x.masked_fill(col_mask, 9.5), {2, 3}, {0, 1, 2, 9.5, 9.5, 9.5});
    // The out-of-place form also broadcasts self to a larger mask (PyTorch's rule).
    check_values(masked_fill(tensor({1.0, 2.0}, dev), bools({1, 0, 0, 1}, dev, {2, 2}), 0.0),
                 {2, 2}, {0, 2, 1, 0});
    // Integer tensors.
    check_values(masked_fill(ints({1, 2, 3}, dev), bools({0, 1, 0}, dev, {3}), 7), {3}, {1, 7, 3});
  }
}

TEST_CASE("masked_fill_ writes in place through views without allocating") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    Tensor x = iota({2, 3}, dev);
    Tensor xt = x.t();  // (3, 2) view
    const Tensor mask = bools({1, 0}, dev, {2});
    const uint32_t version = x.version();
    const int64_t before = allocations_made(dev);
    xt.masked_fill_(mask, 0.0);  // zeroes column 0 of xt = row 0 of x
    CHECK_EQ(allocations_made(dev) - before, 0);
    CHECK_EQ(x.version(), version + 1);
    check_values(x, {2, 3}, {0, 0, 0, 3, 4, 5});
    CHECK_THROWS_WITH_AS(masked_fill_(x, bools({1, 0, 0, 1}, dev, {2, 2, 1}), 0.0),
                         doctest::Contains("[masked_fill_] mask of shape [2, 2, 1] cannot be "
                                           "broadcast to self's shape [2, 3]"),
                         ShapeError);
  }
  CHECK_THROWS_WITH_AS(masked_fill(zeros({2}), ones({2}), 1.0),
                       doctest::Contains("[masked_fill] expected a bool mask, got dtype float32"),
                       DTypeError);
}

TEST_CASE("one_hot encodes int64 labels") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor labels = ints({2, 0, 1, 2}, dev, {2, 2});
    const Tensor oh = one_hot(labels, 4);
    CHECK_EQ(oh.dtype(), kInt64);
    check_values(oh, {2, 2, 4}, {0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});
    // num_classes < 0: the largest label + 1.
    check_values(one_hot(ints({1, 0}, dev)), {2, 2}, {0, 1, 1, 0});
    CHECK_THROWS_WITH_AS(one_hot(ints({0, 3}, dev), 3),
                         doctest::Contains("[one_hot] class value 3 at position 1 is out of range "
                                           "for num_classes 3"),
                         IndexError);
    const auto negative = caught<IndexError>([&] { (void)one_hot(ints({0, -1}, dev), 3); });
    REQUIRE(negative);
    CHECK_EQ(negative->op(), "one_hot");
    CHECK(negative->index() == -1);
    CHECK(negative->position() == 1);
    const auto too_big = caught<IndexError>([&] { (void)one_hot(ints({0, 3}, dev), 3); });
    REQUIRE(too_big);
    CHECK(too_big->index() == 3);
    CHECK(too_big->size() == 3);
  }
  CHECK_THROWS_WITH_AS(one_hot(tensor({1.0}), 2),
                       doctest::Contains("[one_hot] labels must be an int64 tensor"), DTypeError);
  check_value_error([] { (void)one_hot(ints({}, kCPU, {0})); }, "one_hot", "num_classes");
}

TEST_CASE("cat joins along a dim with one allocation") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = iota({2, 2}, dev);  // [0 1; 2 3]
    const Tensor b = tensor({{4.0, 5.0, 6.0}, {7.0, 8.0, 9.0}}, dev);
    const Tensor c = tensor({-1.0, -2.0}, dev).view({2, 1});
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor joined = cat({a, b, c}, 1);
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_EQ(d.allocated(), rounded(12 * sizeof(float)));
    check_values(joined, {2, 6}, {0, 1, 4, 5, 6, -1, 2, 3, 7, 8, 9, -2});
    check_values(cat({a, a.t()}, 0), {4, 2}, {0, 1, 2, 3, 0, 2, 1, 3});
    check_values(cat({a, b.slice(1, 1, 3)}, -1), {2, 4}, {0, 1, 5, 6, 2, 3, 8, 9});
    // 1-d empty tensors are skipped whatever the others' shape (PyTorch's legacy rule).
    check_values(cat({zeros({0}, dev), a}, 0), {2, 2}, {0, 1, 2, 3});
  }
}

TEST_CASE("cat reports mismatched inputs") {
  const Tensor a = zeros({2, 3});
  CHECK_THROWS_WITH_AS(cat({a, zeros({2, 4})}, 0),
                       doctest::Contains("[cat] sizes of tensors must match except in dimension "
                                         "0: expected size 3 but got size 4 for tensor number 1"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(cat({a, zeros({2, 3}, kFloat64)}, 0),
                       doctest::Contains("[cat] expected all tensors to have dtype float32, but "
                                         "tensor 1 has dtype float64"),
                       DTypeError);
  const auto sizes = caught<ShapeError>([&] { (void)cat({a, zeros({2, 4})}, 0); });
  REQUIRE(sizes);
  CHECK_EQ(sizes->op(), "cat");
  check_shape(sizes->lhs(), {2, 3}, "lhs");
  check_shape(sizes->rhs(), {2, 4}, "rhs");
  const auto dtypes = caught<DTypeError>([&] { (void)cat({a, zeros({2, 3}, kFloat64)}, 0); });
  REQUIRE(dtypes);
  check_dtypes(dtypes->dtypes(), {kFloat32, kFloat64});
  check_device_error(
      [&] {
        (void)cat({a, zeros({2, 3}, Device("sim:0"))}, 0);
      },
      "cat", {"cpu", "sim:0"});
  CHECK_THROWS_WITH_AS(cat({a, zeros({3})}, 0),
                       doctest::Contains("[cat] tensors must have the same number of dimensions"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(cat({zeros({})}, 0),
                       doctest::Contains("[cat] zero-dimensional tensor (at position 0)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(cat({a}, 2), doctest::Contains("[cat] dimension out of range"), IndexError);
  check_value_error([] { (void)cat({}, 0); }, "cat", "tensors");
}

TEST_CASE("stack inserts a new dim with one allocation") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = tensor({1.0, 2.0, 3.0}, dev);
    const Tensor b = tensor({4.0, 5.0, 6.0}, dev);
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor s0 = stack({a, b});
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_EQ(d.allocations(), 1);
    check_values(s0, {2, 3}, {1, 2, 3, 4, 5, 6});
    check_values(stack({a, b}, 1), {3, 2}, {1, 4, 2, 5, 3, 6});
    check_values(stack({a, b}, -1), {3, 2}, {1, 4, 2, 5, 3, 6});
    check_values(stack({scalar_tensor(7.0, dev), scalar_tensor(8.0, dev)}), {2}, {7, 8});
  }
  CHECK_THROWS_WITH_AS(stack({zeros({2, 3}), zeros({2, 4})}),
                       doctest::Contains("[stack] stack expects each tensor to be equal size, but "
                                         "got [2, 3] at entry 0 and [2, 4] at entry 1"),
                       ShapeError);
  const auto e = caught<IndexError>([] { (void)stack({zeros({2})}, 3); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "stack");
  CHECK(e->dim() == 3);
  CHECK(e->ndim() == 2);  // the result's ndim: stack inserts a dimension
}

TEST_CASE("pad adds constant borders in PyTorch's order and crops with negative padding") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, dev);
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor p = pad(x, {1, 2});  // last dim: 1 left, 2 right
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_EQ(d.allocated(), rounded(10 * sizeof(float)));
    check_values(p, {2, 5}, {0, 1, 2, 0, 0, 0, 3, 4, 0, 0});
    // (left, right) of the last dim, then (top, bottom) of the one before, with a value.
    check_values(pad(x, {0, 1, 1, 0}, -1.0), {3, 3}, {-1, -1, -1, 1, 2, -1, 3, 4, -1});
    // Negative padding crops: drop the first column, add a row below.
    check_values(pad(x, {-1, 0, 0, 1}), {3, 1}, {2, 4, 0});
    // A strided input (a transpose).
    check_values(pad(x.t(), {1, 0}), {2, 3}, {0, 1, 3, 0, 2, 4});
  }
  CHECK_THROWS_WITH_AS(pad(zeros({2, 2}), {1}),
                       doctest::Contains("[pad] padding length must be even"), ShapeError);
  CHECK_THROWS_WITH_AS(pad(zeros({2}), {1, 1, 1, 1}),
                       doctest::Contains("[pad] padding length must be even and at most twice"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(pad(zeros({2, 3}), {-2, -2}),
                       doctest::Contains("[pad] the input size 3, plus padding -2 and -2, resulted "
                                         "in a negative output size -1 at dimension 1"),
                       ShapeError);
}

}  // TEST_SUITE("engine")
