// Tensor::str() against what PyTorch prints for the same tensors (torch/_tensor_str.py with the
// default print options: precision 4, threshold 1000, edgeitems 3, linewidth 80). memgrad
// spells dtypes without "torch." (dtype=float64) and is otherwise character for character.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "engine/memgrad.h"

using namespace memgrad;

TEST_SUITE("engine") {

TEST_CASE("float tensors print with 4 decimals") {
  CHECK_EQ(tensor({1.5, 2.25}).str(), "tensor([1.5000, 2.2500])");
  CHECK_EQ(tensor({0.1, -0.5}).str(), "tensor([ 0.1000, -0.5000])");
  // Every value is padded to the widest one.
  CHECK_EQ(tensor({1.5, -10.25, 100.0}).str(), "tensor([  1.5000, -10.2500, 100.0000])");
}

TEST_CASE("integral floats print as 1. and zeros do not widen the column") {
  CHECK_EQ(tensor({1.0, 2.0}).str(), "tensor([1., 2.])");
  CHECK_EQ(tensor({-1.0, 20.0}).str(), "tensor([-1., 20.])");
  CHECK_EQ(tensor({0.0, 0.0}).str(), "tensor([0., 0.])");
  CHECK_EQ(tensor({0.0, 1.5}).str(), "tensor([0.0000, 1.5000])");
}

TEST_CASE("2-d and 3-d tensors print one row per line, aligned under the first") {
  CHECK_EQ(tensor({{1.0, 2.0}, {3.0, 4.0}}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK_EQ(arange(8).view({2, 2, 2}).str(),
           "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
  // A transposed (non-contiguous) tensor prints in its logical order.
  CHECK_EQ(tensor({{1.0, 2.0}, {3.0, 4.0}}).t().str(), "tensor([[1., 3.],\n        [2., 4.]])");
}

TEST_CASE("integer and bool tensors print their values padded to the widest") {
  CHECK_EQ(tensor({1, 2, 3}).str(), "tensor([1, 2, 3])");
  CHECK_EQ(tensor({1, -10}).str(), "tensor([  1, -10])");
  // PyTorch pads True to the width of False.
  CHECK_EQ(tensor({1, 0}).to(kBool).str(), "tensor([ True, False])");
  CHECK_EQ(tensor({1, 1}).to(kBool).str(), "tensor([True, True])");
}

TEST_CASE("dtypes other than float32, int64 and bool are named") {
  CHECK_EQ(tensor({1.5, 2.0}, kFloat64).str(), "tensor([1.5000, 2.0000], dtype=float64)");
  CHECK_EQ(tensor({1.5}, kFloat16).str(), "tensor([1.5000], dtype=float16)");
}

TEST_CASE("tensors off the CPU name their device before the dtype") {
  const Device sim("sim:0");
  CHECK_EQ(tensor({1.0, 2.0}, sim).str(), "tensor([1., 2.], device='sim:0')");
  CHECK_EQ(tensor({1.0, 2.0}, TensorOptions(kFloat64).with_device(sim)).str(),
           "tensor([1., 2.], device='sim:0', dtype=float64)");
}

TEST_CASE("0-d tensors print a bare value") {
  CHECK_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  CHECK_EQ(scalar_tensor(0.0).str(), "tensor(0.)");
  CHECK_EQ(scalar_tensor(3).str(), "tensor(3)");
  CHECK_EQ(scalar_tensor(2.0, kFloat64).str(), "tensor(2., dtype=float64)");
}

TEST_CASE("scientific notation is used for tiny, huge or widely spread values") {
  CHECK_EQ(tensor({1e-5, 1.0}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  CHECK_EQ(tensor({0.5, 1e9}).str(), "tensor([5.0000e-01, 1.0000e+09])");
  // Integers spanning more than 1e3 switch too.
  CHECK_EQ(tensor({1.0, 2000.0}).str(), "tensor([1.0000e+00, 2.0000e+03])");
  // A zero does not count as tiny.
  CHECK_EQ(tensor({0.0, 0.5}).str(), "tensor([0.0000, 0.5000])");
}

TEST_CASE("nan and inf print without a decimal point and do not set the width") {
  CHECK_EQ(tensor({1.5, NAN, INFINITY}).str(), "tensor([1.5000,    nan,    inf])");
  CHECK_EQ(tensor({1.0, -INFINITY}).str(), "tensor([1., -inf])");
  CHECK_EQ(tensor({NAN}).str(), "tensor([nan])");
}

TEST_CASE("long rows wrap at 80 columns") {
  CHECK_EQ(arange(20, kFloat32).str(),
           "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
           "        14., 15., 16., 17., 18., 19.])");
}

TEST_CASE("a suffix that would pass 80 columns goes on its own line") {
  CHECK_EQ(full({8}, 10.5, kFloat64).str(),
           "tensor([10.5000, 10.5000, 10.5000, 10.5000, 10.5000, 10.5000, 10.5000, 10.5000],\n"
           "       dtype=float64)");
}

TEST_CASE("more than 1000 elements are summarised with the edges around ...") {
  CHECK_EQ(arange(2000).str(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  // Only the shown edges choose the format: 0..2 and 1997..1999 span more than 1e3.
  CHECK_EQ(arange(2000, kFloat32).str(),
           "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
           "        1.9990e+03])");
  CHECK_EQ(arange(2000).view({1000, 2}).str(),
           "tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n"
           "        [1994, 1995],\n        [1996, 1997],\n        [1998, 1999]])");
  CHECK_EQ(ones({100, 20}).str(),
           "tensor([[1., 1., 1.,  ..., 1., 1., 1.],\n"
           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
           "        ...,\n"
           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
           "        [1., 1., 1.,  ..., 1., 1., 1.]])");
  // Exactly 1000 elements are printed in full.
  CHECK(arange(1000).str().find("...") == std::string::npos);
}

TEST_CASE("empty tensors print [] with their size when not 1-d") {
  CHECK_EQ(empty({0}).str(), "tensor([])");
  CHECK_EQ(zeros({0, 3}).str(), "tensor([], size=(0, 3))");
  CHECK_EQ(zeros({0}, kInt64).str(), "tensor([], dtype=int64)");
  CHECK_EQ(zeros({2, 0}, kBool).str(), "tensor([], size=(2, 0), dtype=bool)");
}

TEST_CASE("operator<< writes str() and an undefined tensor says so") {
  std::ostringstream os;
  os << tensor({1, 2});
  CHECK_EQ(os.str(), "tensor([1, 2])");
  CHECK_EQ(Tensor().str(), "tensor(undefined)");
}

}  // TEST_SUITE("engine")
