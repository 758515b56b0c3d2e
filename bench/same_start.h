// same_start: initial weights and batches that a benchmark and its libtorch peer draw alike, so
// each side can train its model from the same start on the same data and their losses can be
// compared. The benchmarks' timed runs cannot be compared that way: each library draws its own
// weights and data from seed 0, and on random labels the loss after a few hundred steps moves
// with the BLAS kernel's last bits. From the same start, the first loss checks the forward pass
// and the loss a few steps later checks backward and the optimizer as well.
//
// Header-only and free of memgrad and libtorch headers (like bench_util.h): every value comes
// from a SplitMix64 stream, in plain C++, and each side copies the values into its own tensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"

namespace bench::same_start {

// Steps of the same-start run: the loss is reported for the first and the last.
inline constexpr int kSteps = 20;
// Batches cycled by the same-start run.
inline constexpr int kPoolBatches = 4;

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
// the state advances by a fixed odd constant and each output is a bijective mix of the state.
class Stream {
 public:
  explicit Stream(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1), from the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// `count` floats uniform in [low, high), rounded from double.
inline std::vector<float> uniform_values(uint64_t seed, int64_t count, double low, double high) {
  Stream stream(seed);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = static_cast<float>(low + (high - low) * stream.uniform());
  return values;
}

// `count` floats from a standard normal distribution (Box-Muller in double: two uniforms give
// two values; 1 - u keeps the logarithm's argument in (0, 1]).
inline std::vector<float> normal_values(uint64_t seed, int64_t count) {
  Stream stream(seed);
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(1.0 - stream.uniform()));
    const double angle = 2.0 * std::numbers::pi * stream.uniform();
    values[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < values.size()) values[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
  return values;
}

// `count` integers in [0, high) (the modulo's bias is below 2^-57 for the small `high` used).
inline std::vector<int64_t> integer_values(uint64_t seed, int64_t count, int64_t high) {
  if (high <= 0) {
    throw std::invalid_argument("same_start: high must be positive, not " + std::to_string(high));
  }
  Stream stream(seed);
  std::vector<int64_t> values(static_cast<size_t>(count));
  for (int64_t& v : values) v = static_cast<int64_t>(stream.next() % static_cast<uint64_t>(high));
  return values;
}

// The initial values of a model's `index`-th parameter (in its parameters() order), named `name`
// and of `shape`. The two libraries name some layers differently, so the position and the shape
// identify a parameter, and the name only says which rule applies:
//   - two or more dimensions (linear weights, embeddings): uniform in +-1/sqrt(fan_in), fan_in
//     the product of the dimensions after the first, as PyTorch bounds a linear layer's weights;
//   - one dimension, named "...weight" (a layer norm's scale): 1 + uniform in +-0.1;
//   - one dimension otherwise (biases): uniform in +-0.1.
inline std::vector<float> parameter_values(size_t index, const std::string& name,
                                           const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const uint64_t seed = 0x5eed0000ULL + index;
  if (shape.size() >= 2) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(count / shape[0]));
    return uniform_values(seed, count, -bound, bound);
  }
  const bool scale = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
  return scale ? uniform_values(seed, count, 0.9, 1.1) : uniform_values(seed, count, -0.1, 0.1);
}

// The seed of batch `batch`'s inputs (and, + 1, its labels or targets).
inline uint64_t batch_seed(int batch) { return 0xba7c0000ULL + 2 * static_cast<uint64_t>(batch); }

// A parameter's sizes.
using Dims = std::vector<int64_t>;

inline std::string dims_text(const Dims& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The parameters' shapes, in parameters() order, of a stack of linear layers with `widths`
// (inputs first): each layer's weight (out, in), then its bias.
inline std::vector<Dims> linear_stack_shapes(const std::vector<int64_t>& widths) {
  std::vector<Dims> shapes;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    shapes.push_back({widths[i + 1], widths[i]});
    shapes.push_back({widths[i + 1]});
  }
  return shapes;
}

// The parameters' shapes, in parameters() order, of train_charlm's transformer: token and
// position embeddings; per block a layer norm, the query/key/value and output projections, a
// layer norm, the MLP's two linear layers; the final layer norm; the head.
inline std::vector<Dims> transformer_shapes(int64_t vocab, int64_t width, int64_t layers,
                                            int64_t context) {
  std::vector<Dims> shapes{{vocab, width}, {context, width}};
  const auto linear = [&](int64_t in, int64_t out) {
    shapes.push_back({out, in});
    shapes.push_back({out});
  };
  const auto layer_norm = [&] {
    shapes.push_back({width});
    shapes.push_back({width});
  };
  for (int64_t l = 0; l < layers; ++l) {
    layer_norm();
    linear(width, 3 * width);
    linear(width, width);
    layer_norm();
    linear(width, 4 * width);
    linear(4 * width, width);
  }
  layer_norm();
  linear(width, vocab);
  return shapes;
}

// Gives every parameter its same-start values: `parameters` lists the model's (name, shape) in
// its order, `expected` the shapes the benchmark defines, and `copy(i, values)` writes parameter
// i. A model whose parameters differ from `expected` in number or shape throws: the two sides
// would not be training the same model.
template <typename Copy>
void load_parameters(const std::vector<std::pair<std::string, Dims>>& parameters,
                     const std::vector<Dims>& expected, Copy&& copy) {
  if (parameters.size() != expected.size()) {
    throw std::runtime_error("same_start: the model has " + std::to_string(parameters.size()) +
                             " parameters, the benchmark defines " +
                             std::to_string(expected.size()));
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].second != expected[i]) {
      throw std::runtime_error("same_start: parameter " + std::to_string(i) + " (" +
                               parameters[i].first + ") has shape " +
                               dims_text(parameters[i].second) + ", the benchmark defines " +
                               dims_text(expected[i]));
    }
    copy(i, parameter_values(i, parameters[i].first, parameters[i].second));
  }
}

// Runs `step(batch, loss)` kSteps times over `pool` (kPoolBatches batches, cycled), `loss` a
// Loss the step assigns; returns each step's loss. Loss is either library's tensor type.
template <typename Loss, typename Batch, typename Step>
std::vector<double> losses_over_steps(const std::vector<Batch>& pool, Step&& step) {
  if (pool.size() != static_cast<size_t>(kPoolBatches)) {
    throw std::runtime_error("same_start: " + std::to_string(pool.size()) + " batches, not " +
                             std::to_string(kPoolBatches));
  }
  std::vector<double> losses;
  Loss loss;
  for (int s = 0; s < kSteps; ++s) {
    step(pool[static_cast<size_t>(s % kPoolBatches)], loss);
    losses.push_back(loss.template item<double>());
  }
  return losses;
}

// What a same-start run ends with: the loss of every step, averaged over the ranks where there
// are several, and the L2 norm of all the parameters after the last step (summed in float64), which
// moves with what the loss barely shows (a weight decay, GELU's form) where one side has it.
struct Run {
  std::vector<double> losses;
  std::optional<double> weight_norm;  // absent where the parameters are sharded (ZeRO)
};

// Prints "<prefix>_same_start_loss_first" (the loss of the first step, the initial weights'
// forward pass), "..._loss_last" (the loss of step kSteps) and "..._weight_norm", to nine
// significant digits: the two sides agree far beyond report()'s four.
inline void report_run(const std::string& prefix, const Run& run) {
  if (run.losses.size() != static_cast<size_t>(kSteps)) {
    throw std::runtime_error("same_start: " + std::to_string(run.losses.size()) + " losses, not " +
                             std::to_string(kSteps));
  }
  std::printf("%s_same_start_loss_first: %.9g nats\n", prefix.c_str(), run.losses.front());
  std::printf("%s_same_start_loss_last: %.9g nats\n", prefix.c_str(), run.losses.back());
  if (run.weight_norm) {
    std::printf("%s_same_start_weight_norm: %.9g\n", prefix.c_str(), *run.weight_norm);
  }
  std::fflush(stdout);
}

}  // namespace bench::same_start
