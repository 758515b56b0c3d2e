// Layout arithmetic of engine/shape.h: the Shape container, contiguity, broadcasting, dimension
// wrapping, -1 inference and PyTorch's computeStride (when a view can express a new shape).
// All pure functions: no tensor, no allocation.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/shape.h"
#include "tests/support/error_check.h"

using namespace memgrad;
using memgrad::testing::caught;
using memgrad::testing::check_shape;

namespace {

// view_strides, failing the test when no view is possible.
Shape strides_for_view(const Shape& sizes, const Shape& strides, const Shape& target) {
  bool ok = false;
  const Shape out = view_strides(sizes, strides, target, ok);
  CHECK_MESSAGE(ok, "expected a view of " << to_string(sizes) << " strides " << to_string(strides)
                                          << " as " << to_string(target));
  return out;
}

bool view_possible(const Shape& sizes, const Shape& strides, const Shape& target) {
  bool ok = true;
  view_strides(sizes, strides, target, ok);
  return ok;
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("Shape holds up to kMaxDims values inline") {
  Shape s;
  CHECK(s.empty());
  CHECK_EQ(s.size(), 0);
  for (int i = 0; i < kMaxDims; ++i) s.push_back(i + 1);
  CHECK_EQ(s.size(), kMaxDims);
  CHECK_EQ(s.back(), kMaxDims);
  CHECK_THROWS_WITH_AS(s.push_back(9), doctest::Contains("[shape] 9 dimensions requested"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(s.insert(0, 1), doctest::Contains("at most 8"), ShapeError);
  CHECK_THROWS_AS(Shape(std::vector<int64_t>(9, 1)), ShapeError);
  CHECK_THROWS_AS(Shape::filled(9, 1), ShapeError);
  CHECK_EQ(s.size(), kMaxDims);  // a failed push_back leaves the shape unchanged
}

TEST_CASE("Shape insert, erase, equality and conversion keep the order") {
  Shape s{2, 3, 4};
  s.insert(1, 7);
  CHECK_EQ(s, Shape{2, 7, 3, 4});
  s.insert(4, 9);
  CHECK_EQ(s, Shape{2, 7, 3, 4, 9});
  s.erase(0);
  CHECK_EQ(s, Shape{7, 3, 4, 9});
  s.erase(3);
  CHECK_EQ(s, Shape{7, 3, 4});
  CHECK_EQ(s.vec(), std::vector<int64_t>{7, 3, 4});
  CHECK_FALSE(s == Shape{7, 3});
  CHECK_FALSE(s == Shape{7, 3, 5});
  CHECK_EQ(Shape::filled(3, 5), Shape{5, 5, 5});
  CHECK_EQ(Shape(std::vector<int64_t>{1, 2}), Shape{1, 2});
}

TEST_CASE("to_string prints shapes as PyTorch prints sizes") {
  CHECK_EQ(to_string(Shape{2, 3}), "[2, 3]");
  CHECK_EQ(to_string(Shape{5}), "[5]");
  CHECK_EQ(to_string(Shape{}), "[]");
}

TEST_CASE("numel_of multiplies sizes and is 1 for a 0-d shape") {
  CHECK_EQ(numel_of({2, 3, 4}), 24);
  CHECK_EQ(numel_of({}), 1);
  CHECK_EQ(numel_of({3, 0, 2}), 0);
}

TEST_CASE("contiguous_strides are row-major in elements") {
  CHECK_EQ(contiguous_strides({2, 3, 4}), Shape{12, 4, 1});
  CHECK_EQ(contiguous_strides({5}), Shape{1});
  CHECK_EQ(contiguous_strides({}), Shape{});
  // An empty dimension counts as 1 so the other strides stay meaningful (as in PyTorch).
  CHECK_EQ(contiguous_strides({2, 0, 3}), Shape{3, 3, 1});
}

TEST_CASE("is_contiguous_layout ignores the strides of size-1 dimensions") {
  CHECK(is_contiguous_layout({2, 3}, {3, 1}));
  CHECK_FALSE(is_contiguous_layout({2, 3}, {1, 2}));
  CHECK_FALSE(is_contiguous_layout({2, 3}, {6, 2}));
  CHECK(is_contiguous_layout({2, 1, 3}, {3, 99, 1}));
  CHECK(is_contiguous_layout({1, 4}, {7, 1}));
  CHECK(is_contiguous_layout({}, {}));
  CHECK_FALSE(is_contiguous_layout({3, 4}, {0, 1}));  // expanded
  CHECK(is_contiguous_layout({2, 0}, {5, 9}));        // no elements: trivially contiguous
}

TEST_CASE("broadcast_shapes aligns from the right") {
  CHECK_EQ(broadcast_shapes({2, 3}, {3}, "add"), Shape{2, 3});
  CHECK_EQ(broadcast_shapes({2, 1}, {1, 3}, "add"), Shape{2, 3});
  CHECK_EQ(broadcast_shapes({4, 1, 5}, {3, 1}, "add"), Shape{4, 3, 5});
  CHECK_EQ(broadcast_shapes({}, {2, 2}, "add"), Shape{2, 2});
  CHECK_EQ(broadcast_shapes({0, 1}, {1, 3}, "add"), Shape{0, 3});
  CHECK_THROWS_WITH_AS(
      broadcast_shapes({2, 3}, {4}, "mul"),
      doctest::Contains("[mul] shapes [2, 3] and [4] cannot be broadcast: size 3 and size 4 at "
                        "dimension 1"),
      ShapeError);
}

TEST_CASE("a ShapeError carries the op and the shapes it names") {
  const auto e = caught<ShapeError>([] { (void)broadcast_shapes({2, 3}, {4}, "mul"); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "mul");
  check_shape(e->lhs(), {2, 3}, "lhs");
  check_shape(e->rhs(), {4}, "rhs");
  // infer_size names the requested shape; the element count is in the text only.
  const auto bad_view = caught<ShapeError>([] { (void)infer_size({3, 5}, 12, "view"); });
  REQUIRE(bad_view);
  CHECK_EQ(bad_view->op(), "view");
  check_shape(bad_view->expected(), {3, 5}, "expected");
  // Too many dimensions involve no shape: the count is the problem.
  Shape full = Shape::filled(kMaxDims, 1);
  const auto too_many = caught<ShapeError>([&] { full.push_back(1); });
  REQUIRE(too_many);
  CHECK_EQ(too_many->op(), "shape");
  CHECK_FALSE(too_many->lhs());
  CHECK_FALSE(too_many->rhs());
  CHECK_FALSE(too_many->expected());
  CHECK_FALSE(too_many->actual());
}

TEST_CASE("broadcast_strides puts stride 0 on broadcast dimensions") {
  CHECK_EQ(broadcast_strides({3}, {1}, {2, 3}), Shape{0, 1});
  CHECK_EQ(broadcast_strides({2, 1}, {1, 1}, {2, 4}), Shape{1, 0});
  CHECK_EQ(broadcast_strides({2, 3}, {3, 1}, {2, 3}), Shape{3, 1});
  CHECK_EQ(broadcast_strides({}, {}, {2, 2}), Shape{0, 0});
}

TEST_CASE("wrap_dim accepts negative dims and names the valid range") {
  CHECK_EQ(wrap_dim(0, 2, "sum"), 0);
  CHECK_EQ(wrap_dim(-1, 2, "sum"), 1);
  CHECK_EQ(wrap_dim(-2, 2, "sum"), 0);
  CHECK_EQ(wrap_dim(0, 0, "sum"), 0);  // a 0-d tensor accepts 0 and -1, like PyTorch
  CHECK_EQ(wrap_dim(-1, 0, "sum"), 0);
  CHECK_THROWS_WITH_AS(
      wrap_dim(2, 2, "sum"),
      doctest::Contains("[sum] dimension out of range (expected to be in range of [-2, 1], but "
                        "got 2)"),
      IndexError);
  // The fields hold the dim as given and the tensor's ndim; no index or size applies.
  const auto negative = caught<IndexError>([] { (void)wrap_dim(-3, 2, "sum"); });
  REQUIRE(negative);
  CHECK_EQ(negative->op(), "sum");
  CHECK(negative->dim() == -3);
  CHECK(negative->ndim() == 2);
  CHECK_FALSE(negative->index());
  CHECK_FALSE(negative->size());
  // A 0-d tensor reports ndim 0 although it accepts dims 0 and -1.
  const auto scalar = caught<IndexError>([] { (void)wrap_dim(1, 0, "sum"); });
  REQUIRE(scalar);
  CHECK(scalar->dim() == 1);
  CHECK(scalar->ndim() == 0);
  CHECK_EQ(std::string(scalar->what()),
           "[sum] dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

TEST_CASE("infer_size resolves one -1 against the element count") {
  CHECK_EQ(infer_size({3, -1}, 12, "view"), Shape{3, 4});
  CHECK_EQ(infer_size({-1}, 12, "view"), Shape{12});
  CHECK_EQ(infer_size({2, -1, 2}, 12, "view"), Shape{2, 3, 2});
  CHECK_EQ(infer_size({3, 4}, 12, "view"), Shape{3, 4});
  CHECK_EQ(infer_size({}, 1, "view"), Shape{});
  CHECK_EQ(infer_size({0, 3}, 0, "view"), Shape{0, 3});
  // -1 next to a 0 could be anything: PyTorch refuses it too.
  CHECK_THROWS_AS(infer_size({-1, 0}, 0, "view"), ShapeError);
  CHECK_THROWS_WITH_AS(infer_size({3, 5}, 12, "view"),
                       doctest::Contains("[view] shape [3, 5] is invalid for input of size 12"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(infer_size({5, -1}, 12, "view"),
                       doctest::Contains("shape [5, -1] is invalid for input of size 12"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(infer_size({-1, -1}, 12, "reshape"),
                       doctest::Contains("[reshape] only one dimension can be inferred"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(infer_size({-2, 6}, 12, "view"),
                       doctest::Contains("invalid shape dimension -2 in [-2, 6]"), ShapeError);
}

TEST_CASE("view_strides of a contiguous layout are the contiguous strides of the target") {
  CHECK_EQ(strides_for_view({2, 3, 4}, {12, 4, 1}, {6, 4}), Shape{4, 1});
  CHECK_EQ(strides_for_view({2, 3, 4}, {12, 4, 1}, {24}), Shape{1});
  CHECK_EQ(strides_for_view({2, 3, 4}, {12, 4, 1}, {4, 3, 2}), Shape{6, 2, 1});
  CHECK_EQ(strides_for_view({6}, {1}, {2, 1, 3}), Shape{3, 3, 1});
  CHECK_EQ(strides_for_view({}, {}, {1, 1}), Shape{1, 1});  // 0-d to any 1-element shape
  CHECK_EQ(strides_for_view({1}, {1}, {}), Shape{});
}

TEST_CASE("view_strides refuses to merge dimensions that are not contiguous with each other") {
  // (3, 2) transposed from (2, 3): flattening would need two different strides.
  CHECK_FALSE(view_possible({3, 2}, {1, 3}, {6}));
  CHECK_FALSE(view_possible({3, 2}, {1, 3}, {2, 3}));
  // A column slice x[:, :2] of a (2, 4) tensor: the rows are 4 apart, 2 wide.
  CHECK_FALSE(view_possible({2, 2}, {4, 1}, {4}));
  // An expanded dimension (stride 0) cannot merge with its neighbour.
  CHECK_FALSE(view_possible({3, 4}, {0, 1}, {12}));
}

TEST_CASE("view_strides splits and regroups dimensions inside each contiguous chunk") {
  // Transposed (3, 2) can still gain size-1 dims or split each chunk on its own.
  CHECK_EQ(strides_for_view({3, 2}, {1, 3}, {3, 2, 1}), Shape{1, 3, 3});
  CHECK_EQ(strides_for_view({3, 2}, {1, 3}, {3, 1, 2}), Shape{1, 6, 3});
  // The column slice: split the inner chunk only.
  CHECK_EQ(strides_for_view({2, 2}, {4, 1}, {2, 2, 1}), Shape{4, 1, 1});
  CHECK_EQ(strides_for_view({2, 2}, {4, 1}, {2, 1, 2}), Shape{4, 2, 1});
  // Size-1 dimensions with arbitrary strides do not break a chunk.
  CHECK_EQ(strides_for_view({2, 1, 3}, {3, 99, 1}, {6}), Shape{1});
  CHECK_EQ(strides_for_view({2, 1, 3}, {3, 99, 1}, {3, 2}), Shape{2, 1});
  // An expanded dimension keeps stride 0 when it is split.
  CHECK_EQ(strides_for_view({4, 3}, {0, 1}, {2, 2, 3}), Shape{0, 0, 1});
  // A step-2 slice: every stride is doubled.
  CHECK_EQ(strides_for_view({6}, {2}, {2, 3}), Shape{6, 2});
}

TEST_CASE("view_strides of an empty layout uses contiguous strides") {
  CHECK_EQ(strides_for_view({0, 3}, {3, 1}, {3, 0}), Shape{1, 1});
  CHECK_EQ(strides_for_view({2, 0}, {1, 2}, {0}), Shape{1});
}

}  // TEST_SUITE("engine")
