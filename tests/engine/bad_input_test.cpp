// Bad input to the engine: sizes whose products overflow, views that reach outside their
// storage, device indices out of range, scalars with no value in the tensor's dtype, undefined
// tensors. Each is a typed error with the offending values, never a crash, a wrapped count or a
// write into another tensor's bytes (each case reproduces a failure once seen, or a neighbour).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "allocator/config.h"
#include "allocator/error.h"
#include "engine/memgrad.h"
#include "tests/support/error_check.h"

using namespace memgrad;
using memgrad::testing::check_device_error;
using memgrad::testing::check_value_error;

namespace {

constexpr int64_t kTwoTo31 = int64_t{1} << 31;
constexpr int64_t kTwoTo40 = int64_t{1} << 40;
constexpr int64_t kTwoTo62 = int64_t{1} << 62;

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("a tensor whose element count overflows int64 is a ShapeError naming the sizes") {
  // 2^40 x 2^40 = 2^80 elements: once reported numel() == 0.
  CHECK_THROWS_WITH_AS(empty({kTwoTo40, kTwoTo40}),
                       doctest::Contains("overflow: sizes [1099511627776, 1099511627776]"),
                       ShapeError);
  CHECK_THROWS_AS(zeros({kTwoTo40, kTwoTo40, 2}), ShapeError);
  // An empty tensor stays legal however large its other sizes.
  CHECK_EQ(empty({kTwoTo40, kTwoTo40, 0}).numel(), 0);
  CHECK_THROWS_WITH_AS(empty({-1, 3}), doctest::Contains("negative dimension -1"), ShapeError);
}

TEST_CASE("a tensor of more bytes than size_t holds is a ShapeError, one above 1 EiB an OOM") {
  // 2^62 float32 elements are 2^64 bytes: once a 0-byte storage that crashed on first write.
  CHECK_THROWS_WITH_AS(empty({kTwoTo62}), doctest::Contains("Storage size calculation overflowed"),
                       ShapeError);
  // 2^31 x 2^31 float32 elements are 2^64 bytes too: once a crash.
  CHECK_THROWS_AS(zeros({kTwoTo31, kTwoTo31}), ShapeError);
  // 2^62 - 1 elements fit in size_t as bytes (2^64 - 4) but no device holds them.
  try {
    (void)empty({kTwoTo62 - 1});
    FAIL("an absurd tensor was allocated");
  } catch (const OutOfMemoryError& e) {
    CHECK(e.info().too_large);
    CHECK_EQ(e.requested(), static_cast<size_t>(kTwoTo62 - 1) * 4);
  }
}

TEST_CASE("under a lab policy an absurd tensor never shares another tensor's bytes") {
  // Once: under policy:first_fit, empty({2^62 - 1}) got a 0-byte block at the next
  // tensor's address, and writing it changed that tensor.
  const Device device(DeviceType::Sim, 11);
  AllocatorConfig config;
  config.policy = "first_fit";
  set_allocator_config(device, config);
  Tensor kept = full({256}, 7.0f, TensorOptions(kFloat32).with_device(device));
  CHECK_THROWS_AS((void)empty({kTwoTo62 - 1}, TensorOptions(kFloat32).with_device(device)),
                  OutOfMemoryError);
  Tensor next = zeros({256}, TensorOptions(kFloat32).with_device(device));
  CHECK(next.data_ptr() != kept.data_ptr());
  next.fill_(1.0);
  CHECK_EQ(kept.sum().item<double>(), 256.0 * 7.0);
}

TEST_CASE("views whose sizes overflow are ShapeErrors") {
  const Tensor one = ones({1, 1});
  CHECK_THROWS_AS((void)one.expand({kTwoTo40, kTwoTo40}), ShapeError);
  const Tensor x = ones({4});
  // The inferred dimension's known product overflows: 2^62 x 4 x -1.
  CHECK_THROWS_AS((void)x.reshape({kTwoTo62, 4, -1}), ShapeError);
  CHECK_THROWS_AS((void)x.view({kTwoTo62, 8, -1}), ShapeError);
  CHECK_THROWS_AS((void)x.as_strided({kTwoTo40, kTwoTo40}, {0, 0}), ShapeError);
}

TEST_CASE("as_strided's bounds check cannot be passed by a wrapped sum") {
  // (3 - 1) x 2^61 x 4 bytes wraps to 0: the view once passed the check and segfaulted.
  const Tensor x = ones({4});
  CHECK_THROWS_WITH_AS((void)x.as_strided({3}, {int64_t{1} << 61}),
                       doctest::Contains("more than 2^64 bytes"), IndexError);
  CHECK_THROWS_WITH_AS((void)x.as_strided({2, 2}, {std::numeric_limits<int64_t>::max(), 1}),
                       doctest::Contains("out of bounds"), IndexError);
  CHECK_THROWS_AS((void)x.as_strided({2}, {1}, std::numeric_limits<int64_t>::max()), IndexError);
  // The largest legal view still works.
  CHECK_EQ(x.as_strided({2, 2}, {2, 1}).sum().item<double>(), 4.0);
}

TEST_CASE("pad sizes that overflow are ShapeErrors") {
  const Tensor x = ones({2, 3});
  CHECK_THROWS_WITH_AS((void)pad(x, {std::numeric_limits<int64_t>::max(), 1}),
                       doctest::Contains("overflows int64"), ShapeError);
}

TEST_CASE("device indices are checked when a Device is made, with the valid range") {
  // Once: an int8 of -56 and a segfault; a write outside the registry; the CPU's allocator.
  check_device_error([] { (void)Device(DeviceType::Sim, 200); }, "device", {"sim:200"});
  CHECK_THROWS_AS(Device(DeviceType::Sim, -3), DeviceError);
  CHECK_THROWS_AS(Device(DeviceType::Sim, -1), DeviceError);
  CHECK_THROWS_AS(Device(DeviceType::CUDA, 64), DeviceError);
  check_device_error([] { (void)Device(DeviceType::CPU, 1); }, "device", {"cpu:1"});
  CHECK_THROWS_AS(set_sim_capacity(-3, 1 << 20), DeviceError);
  CHECK_THROWS_AS(set_sim_capacity(64, 1 << 20), DeviceError);
  CHECK_EQ(Device(DeviceType::Sim, 63).str(), "sim:63");
}

TEST_CASE("a simulated device larger than the address space can hold is a ConfigError") {
  CHECK_THROWS_WITH_AS(set_sim_capacity(12, size_t{1} << 63),
                       doctest::Contains("more than a simulated device can have"), ConfigError);
  CHECK_THROWS_AS(parse_memory_size("1e30"), ConfigError);
  CHECK_THROWS_AS(parse_memory_size("inf"), ConfigError);
  CHECK_THROWS_AS(parse_memory_size("nan"), ConfigError);
  CHECK_THROWS_AS(parse_memory_size("-1MiB"), ConfigError);
  CHECK_EQ(parse_memory_size("1.5GiB"), size_t{3} << 29);
}

TEST_CASE("a double scalar is converted to int64 only with a check") {
  // A causal mask fills with -inf: no int64 conversion may happen on the way.
  const Tensor scores = zeros({2, 2});
  const Tensor mask = tensor({0, 1, 0, 0}).reshape({2, 2}).to(kBool);
  const Tensor filled = scores.masked_fill(mask, -INFINITY);
  CHECK(std::isinf(filled.to_vector<float>()[1]));
  // No int64 value: errors naming the op and the value.
  check_value_error([] { (void)full({2}, 1e30, TensorOptions(kInt64)); }, "full", "value", "1e+30");
  CHECK_THROWS_AS(zeros({2}, TensorOptions(kInt64)).fill_(NAN), ValueError);
  CHECK_THROWS_AS(zeros({2}, TensorOptions(kInt64)).masked_fill(ones({2}).to(kBool), INFINITY),
                  ValueError);
  CHECK_THROWS_AS(Scalar(NAN).to_int(), ValueError);
  CHECK_THROWS_AS(Scalar(9.3e18).to_int(), ValueError);
  CHECK_EQ(Scalar(-2.7).to_int(), -2);
  // arange with no finite end, or more than 2^63 elements.
  check_value_error([] { (void)arange(0, 1e19); }, "arange", "end", "1e+19");
  CHECK_THROWS_AS(arange(0.0, INFINITY), ValueError);
  CHECK_THROWS_AS(arange(0.0, 1.0, NAN), ValueError);
  CHECK_EQ(arange(0, 5).to_vector<int64_t>(), std::vector<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("casting NaN and out-of-range floats to int64 gives INT64_MIN, a defined value") {
  const Tensor x = from_vector(std::vector<double>{NAN, INFINITY, -1e300, 1e300, 2.9, -2.9});
  const std::vector<int64_t> v = x.to(kInt64).to_vector<int64_t>();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  CHECK_EQ(v, std::vector<int64_t>{kMin, kMin, kMin, kMin, 2, -2});
  CHECK_EQ(x.to(kFloat32).to(kInt64).to_vector<int64_t>()[0], kMin);
}

TEST_CASE("subtracting an integer keeps an int64 tensor int64") {
  Tensor x = tensor({5, 6, 7});
  const Tensor y = x - 1;
  CHECK_EQ(y.dtype(), kInt64);
  CHECK_EQ(y.to_vector<int64_t>(), std::vector<int64_t>{4, 5, 6});
  CHECK_EQ(x.sub(2).dtype(), kInt64);
  x.sub_(1);
  x -= 1;
  CHECK_EQ(x.to_vector<int64_t>(), std::vector<int64_t>{3, 4, 5});
  CHECK_EQ((x - 0.5).dtype(), kFloat32);
  CHECK_THROWS_AS(x.sub_(0.5), DTypeError);
  CHECK_THROWS_AS((void)(x - std::numeric_limits<int64_t>::min()), ValueError);
}

TEST_CASE("an undefined tensor's accessors throw ValueError instead of dereferencing null") {
  const Tensor t;
  CHECK_FALSE(t.defined());
  check_value_error([&] { (void)t.sizes(); }, "sizes", "self");
  CHECK_THROWS_AS((void)t.numel(), ValueError);
  CHECK_THROWS_AS((void)t.dtype(), ValueError);
  CHECK_THROWS_AS((void)t.data_ptr(), ValueError);
  CHECK_THROWS_AS((void)t.data_ptr<float>(), ValueError);
  CHECK_THROWS_AS((void)t.detach(), ValueError);
  CHECK_THROWS_AS((void)t.storage(), ValueError);
}

}  // TEST_SUITE("engine")
