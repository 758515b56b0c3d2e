// The matrix products of the benchmarks' training steps, shape by shape, so a benchmark can time
// them alone, outside the step: what the GEMM library takes for the step's FLOPs on this machine,
// between the FMA-peak bound (bench/fma_peak.h) and the whole step. Both sides time the same
// list through their own matmul (memgrad's, libtorch's), so the figure also compares the two
// GEMM paths.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/bench_util.h"

namespace bench {

// `batch` products of (m x k) @ (k x n); an operand marked transposed is read through the
// transpose of a row-major matrix, as a step reads W in x @ W^T or x in dy^T @ x.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

inline double gemm_flops(const std::vector<GemmShape>& shapes) {
  double flops = 0.0;
  for (const GemmShape& g : shapes) flops += 2.0 * static_cast<double>(g.batch * g.m * g.n * g.k);
  return flops;
}

// A Linear layer's products on `rows` rows, `in` to `out` features: y = x W^T, and in backward
// dx = dy W (unless `input_grad` is false) and dW = dy^T x.
inline void add_linear_gemms(std::vector<GemmShape>& shapes, int64_t rows, int64_t in, int64_t out,
                             bool input_grad = true) {
  shapes.push_back({1, rows, out, in, false, true});
  if (input_grad) shapes.push_back({1, rows, in, out, false, false});
  shapes.push_back({1, out, in, rows, true, false});
}

// The products of one training step of a stack of Linear layers with `widths` (inputs first) on
// a batch of `batch` rows: forward and the weights' gradients one GEMM each per layer, and the
// inputs' gradients for every layer but the first (the data needs none). The elementwise passes
// (bias, activation, loss, optimizer) are not products.
inline std::vector<GemmShape> linear_stack_step_gemms(const std::vector<int64_t>& widths,
                                                      int64_t batch) {
  std::vector<GemmShape> shapes;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    add_linear_gemms(shapes, batch, widths[i], widths[i + 1], /*input_grad=*/i > 0);
  }
  return shapes;
}

// The products of one training step of a decoder-only transformer (train_charlm's CharLM) of
// `layers` blocks of width d = `width`, on `batch` sequences of `context` = T tokens over a
// vocabulary of `vocab`: per block the query/key/value and output projections and the MLP (d x
// 4d and back), the attention of `heads` heads of width d / heads (scores q k^T over all T
// positions, the causal mask applied to them, and weights @ v), then the head; in backward two
// products for each (every input needs its gradient: the embeddings' flows through the first
// block). The elementwise passes (layer norms, GELU, softmax, AdamW) are not products.
inline std::vector<GemmShape> transformer_step_gemms(int64_t vocab, int64_t width, int64_t layers,
                                                     int64_t heads, int64_t context,
                                                     int64_t batch) {
  const int64_t tokens = batch * context, t = context, dh = width / heads, bh = batch * heads;
  std::vector<GemmShape> shapes;
  for (int64_t l = 0; l < layers; ++l) {
    add_linear_gemms(shapes, tokens, width, 3 * width);
    add_linear_gemms(shapes, tokens, width, width);
    add_linear_gemms(shapes, tokens, width, 4 * width);
    add_linear_gemms(shapes, tokens, 4 * width, width);
    shapes.push_back({bh, t, t, dh, false, true});   // scores = q k^T
    shapes.push_back({bh, t, dh, t, false, false});  // y = weights v
    shapes.push_back({bh, t, t, dh, false, true});   // d weights = dy v^T
    shapes.push_back({bh, t, dh, t, true, false});   // dv = weights^T dy
    shapes.push_back({bh, t, dh, t, false, false});  // dq = d scores k
    shapes.push_back({bh, t, dh, t, true, false});   // dk = d scores^T q
  }
  add_linear_gemms(shapes, tokens, width, vocab);
  return shapes;
}

// What runs one product of `shape` on operands made once (random, laid out as the shape says)
// through `matmul`; `randn(b, r, c)` makes a (b, r, c) tensor. Written once for both libraries:
// memgrad's and libtorch's tensors spell transpose and select alike.
template <typename Randn, typename Matmul>
auto product_runner(Randn randn, Matmul matmul) {
  return [randn, matmul](const GemmShape& g) -> std::function<void()> {
    auto operand = [&](int64_t rows, int64_t cols, bool trans) {
      auto t = trans ? randn(g.batch, cols, rows).transpose(1, 2) : randn(g.batch, rows, cols);
      return g.batch == 1 ? t.select(0, 0) : t;
    };
    auto a = operand(g.m, g.k, g.trans_a);
    auto b = operand(g.k, g.n, g.trans_b);
    return [a, b, matmul] { matmul(a, b); };
  };
}

// What runs each product of `shapes`, its operands made now: `prepare(shape)` makes a
// product's operands and returns what runs it.
template <typename Prepare>
std::vector<std::function<void()>> prepared_products(const std::vector<GemmShape>& shapes,
                                                     Prepare prepare) {
  std::vector<std::function<void()>> products;
  for (const GemmShape& g : shapes) products.push_back(prepare(g));
  return products;
}

// The median time (ms) of running every product of `shapes` once, over 50 repetitions after 3
// untimed ones; the operands are made before the timing (prepared_products).
template <typename Prepare>
double time_step_gemms(const std::vector<GemmShape>& shapes, Prepare prepare) {
  const std::vector<std::function<void()>> products = prepared_products(shapes, prepare);
  std::vector<double> ms;
  for (int r = 0; r < 53; ++r) {
    const Clock::time_point start = Clock::now();
    for (const auto& run : products) run();
    if (r >= 3) ms.push_back(seconds_since(start) * 1e3);
  }
  return median(ms);
}

}  // namespace bench
