// The transformer's forward memory (examples/charlm/forward_memory.h) on small sizes: every part
// of what one training forward keeps equals its expectation from the shapes, in float32, under
// autocast and with checkpointing, and the attention part grows 4x per doubling of the context.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/memgrad.h"
#include "examples/charlm/charlm_model.h"
#include "examples/charlm/forward_memory.h"

using namespace memgrad;
using namespace memgrad::examples;

namespace {

// Small sizes whose every tensor is a multiple of 512 bytes, so that ratios are exact:
// B = 2, T = 64, C = 16, H = 2, V = 16, two blocks.
constexpr CharLMShape kShape{16, 16, 2, 2, 64};
constexpr int64_t kBatch = 2;

ForwardMemory measure(const ForwardMode& mode, const CharLMShape& shape = kShape,
                      int64_t batch = kBatch) {
  manual_seed(3);
  CharLM model(shape, 0.0, mode.checkpoint_segments, kCPU);
  const TensorOptions ints = TensorOptions(kInt64);
  const Tensor idx = randint(0, shape.vocab, {batch, shape.context}, ints);
  const Tensor target = randint(0, shape.vocab, {batch, shape.context}, ints);
  LossAndAccuracy result;
  ForwardMemory m = measure_forward(model, idx, target, mode, &result);
  CHECK(result.loss.requires_grad());  // the graph is there for backward
  CHECK(result.accuracy >= 0.0);
  CHECK(result.accuracy <= 1.0);
  return m;
}

void check_parts(const ForwardMemory& m) {
  for (const ForwardPart& p : m.parts) {
    CAPTURE(p.what);
    CHECK_EQ(p.measured, p.expected);
  }
  CHECK_EQ(m.loss, 512);
  CHECK_EQ(m.served_whole, m.expected_served_whole);
  CHECK_EQ(m.unaccounted, 0);
  CHECK_EQ(m.measured_total, m.expected_total);
}

int64_t part(const ForwardMemory& m, const std::string& prefix) {
  for (const ForwardPart& p : m.parts) {
    if (p.what.starts_with(prefix)) return p.measured;
  }
  FAIL("no part named " << prefix);
  return 0;
}

}  // namespace

TEST_SUITE("examples") {

TEST_CASE("every part of the transformer's forward memory matches the shapes in float32") {
  const ForwardMemory m = measure({});
  check_parts(m);
  // (B, H, T, T) = (2, 2, 64, 64) float32 probabilities per block.
  CHECK_EQ(m.attention, 2 * (2 * 2 * 64 * 64 * 4));
  // q, k and v are views of one (B, T, 3C) buffer per block: counted once, with ln1's output.
  CHECK_EQ(part(m, "2 x q/k/v"), 2 * (2 * 64 * 16 * 4 + 2 * 64 * 48 * 4));
}

TEST_CASE("q, k and v are told from attention probabilities of the same shape (C / H == T)") {
  // Width 32 over 2 heads and a context of 16: q, k, v and the probabilities are all
  // (8, 2, 16, 16); only the views of the (B, T, 3C) buffer are q, k and v.
  const CharLMShape square{16, 32, 2, 2, 16};
  for (const bool amp : {false, true}) {
    CAPTURE(amp);
    const ForwardMemory m = measure({.amp = amp}, square, 8);
    check_parts(m);
    const int64_t bytes = amp ? 2 : 4;
    CHECK_EQ(m.attention, 2 * (8 * 2 * 16 * 16 * 4 + (amp ? 8 * 2 * 16 * 16 * 2 : 0)));
    CHECK_EQ(part(m, "2 x q/k/v"), 2 * (8 * 16 * 32 * bytes + 8 * 16 * 96 * bytes));
  }
}

TEST_CASE("under autocast the float16 parts halve and float16 weight copies appear") {
  const ForwardMemory plain = measure({});
  const ForwardMemory amp = measure({.amp = true});
  check_parts(amp);
  CHECK_EQ(part(amp, "2 x q/k/v") * 2, part(plain, "2 x q/k/v"));
  CHECK_EQ(part(amp, "2 x MLP") * 2, part(plain, "2 x MLP"));
  // Softmax stays float32 and att @ v keeps a float16 copy: 1.5x.
  CHECK_EQ(amp.attention * 2, plain.attention * 3);
  CHECK_EQ(part(amp, "2 x ln1"), part(plain, "2 x ln1"));  // layer norms run in float32
  CHECK(part(amp, "float16 copies") > 0);
  CHECK_EQ(part(plain, "float16 copies"), 0);
}

TEST_CASE("with checkpointing only the last segment's blocks keep their insides") {
  const ForwardMemory plain = measure({});
  const ForwardMemory ckpt = measure({.checkpoint_segments = 2});
  check_parts(ckpt);
  // The first of two blocks keeps only its input (B, T, C); the second keeps what a block keeps.
  CHECK_EQ(part(ckpt, "checkpointed segments"), 2 * 64 * 16 * 4);
  CHECK_EQ(ckpt.attention * 2, plain.attention);
  CHECK(ckpt.measured_total < plain.measured_total);
}

TEST_CASE("the attention probabilities grow 4x per doubling of the context, the rest 2x") {
  manual_seed(4);
  const std::vector<ContextPoint> points = context_growth(kShape, kBatch, {64, 128, 256}, kCPU);
  REQUIRE_EQ(points.size(), 3);
  for (const ContextPoint& p : points) {
    CAPTURE(p.context);
    CHECK_EQ(p.attention, p.expected_attention);
    CHECK_EQ(p.rest, p.expected_rest);
  }
  CHECK_EQ(points[1].attention, 4 * points[0].attention);
  CHECK_EQ(points[2].attention, 4 * points[1].attention);
  // Everything else is linear in T: at these sizes every tensor of it is a multiple of 512 bytes
  // but the 0-d loss, which does not grow.
  CHECK_EQ(points[1].rest - 512, 2 * (points[0].rest - 512));
  CHECK_EQ(points[2].rest - 512, 2 * (points[1].rest - 512));
}

}  // TEST_SUITE("examples")
