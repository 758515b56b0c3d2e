// The benchmarks' same-start weights and batches (bench/same_start.h): a generator that both
// libraries' programs reproduce to the bit, parameters matched by position and shape, and a
// model that does not match refused with the parameter named.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_mlp.h"
#include "bench/memgrad_same_start.h"
#include "bench/same_start.h"

using namespace memgrad;
namespace ss = bench::same_start;

TEST_CASE("same_start's stream is SplitMix64") {
  // The reference outputs of SplitMix64 from state 0.
  ss::Stream stream(0);
  CHECK(stream.next() == 0xe220a8397b1dcdafULL);
  CHECK(stream.next() == 0x6e789e6aa1b965f4ULL);
  CHECK(stream.next() == 0x06c45d188009454fULL);
}

// The same values, to the bit, are asserted of bench/peer/same_start.py (the Python peer's copy)
// in tests/tools/run_bench_test.py: change both or neither.
TEST_CASE("same_start's values are the ones its Python copy reproduces") {
  CHECK(ss::uniform_values(7, 3, -0.25, 0.25) ==
        std::vector<float>{-0x1.c341e2p-5f, -0x1.eecf0cp-3f, 0x1.9a6102p-3f});
  CHECK(ss::normal_values(3, 3) ==
        std::vector<float>{-0x1.34d106p-3f, -0x1.de3804p-2f, 0x1.3c685p+0f});
  CHECK(ss::integer_values(5, 6, 10) == std::vector<int64_t>{8, 4, 3, 9, 1, 6});
  const std::vector<float> w = ss::parameter_values(2, "fc2.weight", {512, 512});
  CHECK(std::vector<float>(w.begin(), w.begin() + 3) ==
        std::vector<float>{0x1.159ec4p-8f, -0x1.af38aep-6f, -0x1.22c4dcp-8f});
  CHECK(ss::parameter_values(3, "ln.weight", {128})[0] == 0x1.08dc5ep+0f);
}

TEST_CASE("same_start's values: uniform bounds, normal moments, integers in range") {
  const std::vector<float> u = ss::uniform_values(7, 10000, -0.25, 0.25);
  for (float v : u) REQUIRE((v >= -0.25f && v <= 0.25f));
  CHECK(ss::uniform_values(7, 10000, -0.25, 0.25) == u);  // the same seed, the same values
  CHECK(ss::uniform_values(8, 10000, -0.25, 0.25) != u);

  const std::vector<float> n = ss::normal_values(3, 100001);  // odd: the last from one pair
  double sum = 0.0, squares = 0.0;
  for (float v : n) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(n.size());
  CHECK(std::abs(mean) < 0.01);  // 3 standard errors of the mean (1 / sqrt(1e5)) is 0.0095
  CHECK(std::abs(squares / static_cast<double>(n.size()) - mean * mean - 1.0) < 0.02);

  const std::vector<int64_t> labels = ss::integer_values(5, 1000, 10);
  std::vector<int> seen(10, 0);
  for (int64_t v : labels) {
    REQUIRE((v >= 0 && v < 10));
    ++seen[static_cast<size_t>(v)];
  }
  for (int count : seen) CHECK(count > 0);
  CHECK_THROWS_WITH_AS(ss::integer_values(5, 1, 0), "same_start: high must be positive, not 0",
                       std::invalid_argument);
}

TEST_CASE("load_same_start gives each parameter the values of its position and shape") {
  bench::Mlp model;
  bench::load_same_start(model, ss::linear_stack_shapes({784, 512, 512, 10}));
  const auto named = model.named_parameters();
  REQUIRE(named.size() == 6);
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [name, p] = named[i];
    CAPTURE(name);
    const std::vector<float> expected = ss::parameter_values(i, name, p.sizes().vec());
    const Tensor values = p.contiguous();
    REQUIRE(values.numel() == static_cast<int64_t>(expected.size()));
    CHECK(std::memcmp(values.data_ptr(), expected.data(), expected.size() * sizeof(float)) == 0);
  }
  // The rules: a weight within +-1/sqrt(fan_in), a bias within +-0.1.
  const Tensor w1 = named[0].second;
  CHECK(w1.abs().max().item<double>() <= 1.0 / std::sqrt(784.0));
  CHECK(w1.abs().max().item<double>() > 0.9 / std::sqrt(784.0));
  CHECK(named[1].second.abs().max().item<double>() <= 0.1);
  // A layer norm's scale (a 1-d weight) starts near 1.
  const std::vector<float> scale = ss::parameter_values(3, "ln.weight", {128});
  for (float v : scale) REQUIRE((v >= 0.9f && v <= 1.1f));
}

TEST_CASE("load_same_start refuses a model whose parameters differ from the benchmark's") {
  bench::Mlp model;
  // One layer wider than the model's: parameter 2 (fc2.weight) is 512 x 512, not 600 x 512.
  std::string what;
  try {
    bench::load_same_start(model, ss::linear_stack_shapes({784, 512, 600, 10}));
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  CHECK(what ==
        "same_start: parameter 2 (fc2.weight) has shape [512, 512], the benchmark "
        "defines [600, 512]");
  CHECK_THROWS_WITH_AS(bench::load_same_start(model, ss::linear_stack_shapes({784, 512, 10})),
                       "same_start: the model has 6 parameters, the benchmark defines 4",
                       std::runtime_error);
  // The transformer's list: 2 embeddings, 12 per block, a layer norm's 2, the head's 2.
  CHECK(ss::transformer_shapes(86, 128, 2, 64).size() == 2 + 2 * 12 + 2 + 2);
  CHECK(ss::transformer_shapes(86, 128, 2, 64)[4] == ss::Dims{384, 128});
}
