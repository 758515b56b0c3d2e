// Matrix products: values against hand-computed results, every operand layout (transposed,
// sliced, broadcast batch), the memory each call takes, dtypes, and every error.
#include <doctest/doctest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/memgrad.h"
#include "kernels/backend.h"
#include "memgrad_build_config.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::allocations_made;
using memgrad::testing::caught;
using memgrad::testing::check_device_error;
using memgrad::testing::check_dtypes;
using memgrad::testing::check_shape;
using memgrad::testing::check_values;
using memgrad::testing::devices_under_test;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

// Row-major values 0, 1, 2, ... scaled by `scale`, shaped `sizes`.
Tensor iota(const Shape& sizes, Device dev, double scale = 1.0, DType dtype = kFloat32) {
  return (arange(numel_of(sizes), TensorOptions(kFloat64).with_device(dev)) * scale)
      .to(dtype)
      .view(sizes);
}

// Reference product of row-major (batch, n, k) and (batch, k, m) value lists.
std::vector<double> reference_bmm(const std::vector<double>& a, const std::vector<double>& b,
                                  int64_t batch, int64_t n, int64_t k, int64_t m) {
  std::vector<double> c(static_cast<size_t>(batch * n * m), 0.0);
  for (int64_t p = 0; p < batch; ++p) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double s = 0.0;
        for (int64_t q = 0; q < k; ++q) s += a[(p * n + i) * k + q] * b[(p * k + q) * m + j];
        c[(p * n + i) * m + j] = s;
      }
    }
  }
  return c;
}

// The linear tests' input x (2, 3) and weight w (4, 3).
struct SmallLinear {
  Tensor x, w;
};
SmallLinear small_linear(Device dev) {
  return {tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, dev),
          tensor({{1.0, 0.0, 0.0}, {0.0, 1.0, 1.0}, {1.0, 1.0, 1.0}, {0.0, 0.0, 2.0}}, dev)};
}

// The allocations `run` makes on the CPU, in order: size and the op its trace context names.
std::vector<std::pair<uint64_t, std::string>> traced_allocs(const std::function<void()>& run) {
  PolicyAllocator& cpu = allocator_for(kCPU);
  const bool was_tracing = cpu.trace().enabled();
  cpu.trace().enable();
  run();
  std::vector<std::pair<uint64_t, std::string>> allocs;
  const std::vector<TraceContextRecord> contexts = cpu.trace().contexts();
  for (const TraceEvent& e : cpu.trace().events()) {
    if (e.action == TraceAction::Alloc) allocs.emplace_back(e.nbytes, contexts[e.context].op);
  }
  if (!was_tracing) cpu.trace().disable();
  return allocs;
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("mm multiplies two matrices and allocates only the result") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, dev);
    const Tensor b = tensor({{7.0, 8.0}, {9.0, 10.0}, {11.0, 12.0}}, dev);
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor c = mm(a, b);
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_EQ(d.allocated(), rounded(4 * sizeof(float)));
    // [1 2 3; 4 5 6] [7 8; 9 10; 11 12] = [58 64; 139 154]
    check_values(c, {2, 2}, {58, 64, 139, 154});
    CHECK_EQ(c.device(), dev);
    check_values(a.mm(b), {2, 2}, {58, 64, 139, 154});
  }
}

TEST_CASE("transposed operands are read in place without a copy") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor at = tensor({{1.0, 4.0}, {2.0, 5.0}, {3.0, 6.0}}, dev);   // a = at.t() (2, 3)
    const Tensor bt = tensor({{7.0, 9.0, 11.0}, {8.0, 10.0, 12.0}}, dev);  // b = bt.t() (3, 2)
    const Tensor a = at.t();
    const Tensor b = bt.t();
    REQUIRE_FALSE(a.is_contiguous());
    const Tensor a_rows = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, dev);
    const Tensor b_rows = tensor({{7.0, 8.0}, {9.0, 10.0}, {11.0, 12.0}}, dev);
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor c1 = mm(a, b);
    const Tensor c2 = matmul(a, b_rows);
    const Tensor c3 = mm(a_rows, b);
    // Three results, no temporaries.
    CHECK_EQ(allocations_made(dev) - before, 3);
    CHECK_EQ(d.allocations(), 3);
    for (const Tensor* c : {&c1, &c2, &c3}) check_values(*c, {2, 2}, {58, 64, 139, 154});
  }
}

TEST_CASE("sliced operands give the right values and free any temporary") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor big = iota({4, 6}, dev);  // row r: 6r .. 6r+5
    // Rows 1..2, columns 0..2: a row-major slice (row stride 6), read in place.
    const Tensor rows = big.slice(0, 1, 3).slice(1, 0, 3);
    // Every other column: neither row- nor column-contiguous, packed first.
    const Tensor stepped = big.slice(0, 0, 2).slice(1, 0, 6, 2);  // [[0 2 4], [6 8 10]]
    const Tensor b = tensor({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}}, dev);
    StatsDelta d(allocator_for(dev));
    int64_t before = allocations_made(dev);
    const Tensor r1 = mm(rows, b);
    CHECK_EQ(allocations_made(dev) - before, 1);
    // [6 7 8; 12 13 14] @ b = [6+8, 7+8; 12+14, 13+14]
    check_values(r1, {2, 2}, {14, 15, 26, 27});
    before = allocations_made(dev);
    const Tensor r2 = mm(stepped, b);
    CHECK_EQ(allocations_made(dev) - before, 2);  // the packed copy and the result
    CHECK_EQ(d.allocations(), 2);                 // the copy is already freed
    check_values(r2, {2, 2}, {4, 6, 16, 18});
  }
}

TEST_CASE("matmul follows torch.matmul for 1-d operands") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor v = tensor({1.0, 2.0, 3.0}, dev);
    const Tensor w = tensor({4.0, 5.0, 6.0}, dev);
    const Tensor m = tensor({{1.0, 0.0, 2.0}, {0.0, 1.0, -1.0}}, dev);  // (2, 3)
    const Tensor dot = matmul(v, w);
    CHECK_EQ(dot.dim(), 0);
    CHECK_EQ(dot.item<double>(), doctest::Approx(32.0));               // 4 + 10 + 18
    check_values(matmul(m, v), {2}, {7, -1});                          // (2, 3) @ (3) -> (2)
    check_values(matmul(tensor({1.0, 2.0}, dev), m), {3}, {1, 2, 0});  // (2) @ (2, 3) -> (3)
    // A strided vector (every other element) is a valid operand with a stride.
    const Tensor strided = tensor({1.0, 9.0, 2.0, 9.0, 3.0, 9.0}, dev).slice(0, 0, 6, 2);
    CHECK_EQ(matmul(strided, w).item<double>(), doctest::Approx(32.0));
    check_values(matmul(m, strided), {2}, {7, -1});
  }
}

TEST_CASE("matmul broadcasts batch dims without copying expanded operands") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = iota({2, 1, 3, 4}, dev, 0.5);
    const Tensor b = iota({5, 4, 2}, dev, 0.25);
    const int64_t before = allocations_made(dev);
    const Tensor c = matmul(a, b);
    CHECK_EQ(allocations_made(dev) - before, 1);
    // Expected: c[i, j] = a[i, 0] @ b[j] for i < 2, j < 5.
    const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> expected;
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        const std::vector<double> ai(av.begin() + i * 12, av.begin() + (i + 1) * 12);
        const std::vector<double> bj(bv.begin() + j * 8, bv.begin() + (j + 1) * 8);
        const std::vector<double> cij = reference_bmm(ai, bj, 1, 3, 4, 2);
        expected.insert(expected.end(), cij.begin(), cij.end());
      }
    }
    check_values(c, {2, 5, 3, 2}, expected, 1e-4);
  }
}

TEST_CASE(
    "matmul of attention's head views, whose two batch dims do not merge, reads them in place") {
  // q and k as causal attention makes them: (B, T, 3C) split and viewed as (B, H, T, D) with the
  // heads inside each sequence, so the B and H strides (T 3C and D) do not merge into one batch
  // dim; the kernel gets them as its two batch levels. A third batch dim in front loops in the
  // engine.
  const int64_t B = 3, T = 5, H = 2, D = 4, C = H * D;
  for (Device dev : devices_under_test()) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
      CAPTURE(dev.str());
      CAPTURE(dtype_name(dtype));
      const Tensor qkv = iota({2, B, T, 3 * C}, dev, 0.001, dtype);
      auto heads = [&](int64_t part) {
        return qkv.narrow(3, part * C, C).view({2, B, T, H, D}).transpose(2, 3);
      };
      const Tensor q = heads(0), k = heads(1);
      const int64_t before = allocations_made(dev);
      const Tensor att = matmul(q, k.mT());
      CHECK_EQ(allocations_made(dev) - before, 1);
      const std::vector<double> expected =
          reference_bmm(q.contiguous().to_vector<double>(), k.mT().contiguous().to_vector<double>(),
                        2 * B * H, T, D, T);
      // float16: inputs up to 0.72 rounded to half (relative 2^-11), sums of 4 products up to 2.
      check_values(att, {2, B, H, T, T}, expected, dtype == kFloat16 ? 1e-2 : 1e-5);
    }
  }
}

TEST_CASE("matmul of a batch with a matrix or a vector") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor x = iota({2, 3, 4}, dev);
    const Tensor w = iota({4, 5}, dev, 0.5);
    const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
    std::vector<double> w2(wv);
    w2.insert(w2.end(), wv.begin(), wv.end());
    // (2, 3, 4) @ (4, 5): the batch folds into the rows of one product.
    check_values(matmul(x, w), {2, 3, 5}, reference_bmm(xv, w2, 2, 3, 4, 5), 1e-4);
    // (2, 3, 4) @ (4) -> (2, 3) and (3) @ (2, 3, 4) -> (2, 4).
    check_values(matmul(x, tensor({1.0, 0.0, 0.0, 1.0}, dev)), {2, 3}, {3, 11, 19, 27, 35, 43});
    check_values(matmul(tensor({1.0, 1.0, 1.0}, dev), x), {2, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
    // (4, 5)^T-like left operand shared by a batch: (3, 4) @ (2, 4, 5).
    const Tensor left = iota({3, 4}, dev);
    const Tensor right = iota({2, 4, 5}, dev);
    const std::vector<double> lv = left.to_vector<double>();
    std::vector<double> l2(lv);
    l2.insert(l2.end(), lv.begin(), lv.end());
    check_values(matmul(left, right), {2, 3, 5},
                 reference_bmm(l2, right.to_vector<double>(), 2, 3, 4, 5), 1e-3);
    // A batch whose matrices are transposed views (mT).
    const Tensor xt = iota({2, 4, 3}, dev).mT();
    check_values(matmul(xt, w), {2, 3, 5},
                 reference_bmm(xt.contiguous().to_vector<double>(), w2, 2, 3, 4, 5), 1e-4);
  }
}

TEST_CASE("bmm multiplies matching batches") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = iota({3, 2, 4}, dev);
    const Tensor b = iota({3, 4, 2}, dev, -1.0);
    const std::vector<double> expected =
        reference_bmm(a.to_vector<double>(), b.to_vector<double>(), 3, 2, 4, 2);
    check_values(bmm(a, b), {3, 2, 2}, expected);
    // Transposed batches (mT views) read in place.
    const Tensor at = iota({3, 4, 2}, dev).mT();
    const Tensor bt = b.mT().contiguous();  // bt.mT() has b's values in transposed memory
    const int64_t before = allocations_made(dev);
    const Tensor c = a.bmm(bt.mT());
    CHECK_EQ(allocations_made(dev) - before, 1);
    check_values(c, {3, 2, 2}, expected);
    check_values(
        bmm(at, b), {3, 2, 2},
        reference_bmm(at.contiguous().to_vector<double>(), b.to_vector<double>(), 3, 2, 4, 2));
  }
}

TEST_CASE("addmm adds a broadcast bias with beta and alpha") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, dev);
    const Tensor b = tensor({{7.0, 8.0}, {9.0, 10.0}, {11.0, 12.0}}, dev);
    const Tensor bias = tensor({1.0, -1.0}, dev);
    StatsDelta d(allocator_for(dev));
    const Tensor c = addmm(bias, a, b);
    CHECK_EQ(d.allocations(), 1);
    check_values(c, {2, 2}, {59, 63, 140, 153});
    // 2 bias + 0.5 (a @ b) = [2 + 29, -2 + 32; 2 + 69.5, -2 + 77]
    check_values(addmm(bias, a, b, 2.0, 0.5), {2, 2}, {31, 30, 71.5, 75});
    // A full (2, 2) bias and a column bias (2, 1).
    check_values(addmm(tensor({{1.0, 2.0}, {3.0, 4.0}}, dev), a, b), {2, 2}, {59, 66, 142, 158});
    check_values(addmm(tensor({10.0, 20.0}, dev).view({2, 1}), a, b), {2, 2}, {68, 74, 159, 174});
    // beta = 0 ignores the bias, NaN included (PyTorch's rule).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    check_values(addmm(tensor({nan, nan}, dev), a, b, 0.0), {2, 2}, {58, 64, 139, 154});
  }
}

TEST_CASE("linear computes x weight^T + bias without copying the weight") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const auto [x, w] = small_linear(dev);
    const Tensor b = tensor({0.5, 0.0, -1.0, 1.0}, dev);
    StatsDelta d(allocator_for(dev));
    const int64_t before = allocations_made(dev);
    const Tensor y = linear(x, w, b);
    CHECK_EQ(allocations_made(dev) - before, 1);
    CHECK_EQ(d.allocated(), rounded(8 * sizeof(float)));
    // x w^T = [1 5 6 6; 4 11 15 12]
    check_values(y, {2, 4}, {1.5, 5, 5, 7, 4.5, 11, 14, 13});
    check_values(linear(x, w), {2, 4}, {1, 5, 6, 6, 4, 11, 15, 12});
    // Leading dims fold: (2, 1, 3) -> (2, 1, 4); a 1-d input gives a 1-d output.
    check_values(linear(x.view({2, 1, 3}), w, b), {2, 1, 4}, {1.5, 5, 5, 7, 4.5, 11, 14, 13});
    check_values(linear(tensor({1.0, 2.0, 3.0}, dev), w, b), {4}, {1.5, 5, 5, 7});
    // A transposed input (3, 2).t() still gives the same values.
    const Tensor xt = tensor({{1.0, 4.0}, {2.0, 5.0}, {3.0, 6.0}}, dev).t();
    check_values(linear(xt, w, b), {2, 4}, {1.5, 5, 5, 7, 4.5, 11, 14, 13});
  }
}

TEST_CASE(
    "linear_backward gives matmul's and mm's gradients, one thread's bits, same allocations") {
  // grad (3, 700, 96) of linear(x (3, 700, 64), weight (96, 64)): the input gradient grad @
  // weight, the weight gradient grad^T @ x over 2100 rows and the bias gradient. On two threads
  // the two products run side by side, each on one thread: the bits of one thread's matmul and
  // mm, where the row bands and OpenBLAS's own threads would give them too, or not.
  const int threads_before = omp_get_max_threads();
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const TensorOptions options(dtype);
    const Tensor grad = randn({3, 700, 96}, options), x = randn({3, 700, 64}, options);
    const Tensor weight = randn({96, 64}, options);
    auto composed = [&] {
      const Tensor gx = matmul(grad, weight);
      const Tensor g2 = grad.reshape({-1, 96});
      const Tensor gw = mm(g2.t(), x.reshape({-1, 64}));
      return std::array<Tensor, 3>{gx, gw, g2.sum({0})};
    };
    omp_set_num_threads(1);
    const std::array<Tensor, 3> one_thread = composed();
    omp_set_num_threads(2);
    std::array<Tensor, 3> grads;
    StatsDelta d(allocator_for(kCPU));
    const int64_t before = allocations_made(kCPU);
    grads = linear_backward(grad, x, weight, {true, true, true});
    CHECK_EQ(allocations_made(kCPU) - before, 3);
    CHECK_EQ(d.allocated(), rounded(grad.nbytes() / 96 * 64) + rounded(weight.nbytes()) +
                                rounded(96 * element_size(dtype)));
    const auto pair_allocs = traced_allocs([&] {
      linear_backward(grad, x, weight, {true, true, true});
    });
    const auto composed_allocs = traced_allocs([&] { composed(); });
    omp_set_num_threads(threads_before);
    CHECK_EQ(pair_allocs, composed_allocs);
    REQUIRE_EQ(pair_allocs.size(), 3);
    CHECK_EQ(pair_allocs[0].second, "matmul");
    CHECK_EQ(pair_allocs[1].second, "mm");
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK_EQ(grads[i].sizes(), one_thread[i].sizes());
      const double tolerance = dtype == kFloat32 ? 1e-3 : 1e-9;
      check_values(grads[i], one_thread[i].sizes(), one_thread[i].to_vector<double>(), tolerance);
#if MEMGRAD_WITH_BLAS
      if (i < 2)
        CHECK(std::memcmp(grads[i].data_ptr(), one_thread[i].data_ptr(), grads[i].nbytes()) == 0);
#endif
    }
  }
}

TEST_CASE("linear_backward computes only what is asked, and falls back for odd layouts") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const auto [x, w] = small_linear(dev);
    const Tensor g = tensor({{1.0, 0.0, 2.0, 1.0}, {0.0, 1.0, 0.0, 3.0}}, dev);  // (2, 4)
    // g w = [3 2 4; 0 1 7]; g^T x = [1 2 3; 4 5 6; 2 4 6; 13 17 21]; g summed = [1 1 2 4]
    const std::vector<double> gx{3, 2, 4, 0, 1, 7}, gw{1, 2, 3, 4, 5, 6, 2, 4, 6, 13, 17, 21};
    std::array<Tensor, 3> all = linear_backward(g, x, w, {true, true, true});
    check_values(all[0], {2, 3}, gx);
    check_values(all[1], {4, 3}, gw);
    check_values(all[2], {4}, {1, 1, 2, 4});
    // Only the bias: neither product runs, and no x or weight is needed.
    StatsDelta d(allocator_for(dev));
    std::array<Tensor, 3> bias_only = linear_backward(g, Tensor(), Tensor(), {false, false, true});
    CHECK_FALSE(bias_only[0].defined());
    CHECK_FALSE(bias_only[1].defined());
    check_values(bias_only[2], {4}, {1, 1, 2, 4});
    CHECK_EQ(d.allocated(), rounded(4 * sizeof(float)));
    // A transposed grad and a transposed weight (copies where GEMM needs them) give the same.
    const Tensor gt = tensor({{1.0, 0.0}, {0.0, 1.0}, {2.0, 0.0}, {1.0, 3.0}}, dev).t();
    const Tensor wt =
        tensor({{1.0, 0.0, 1.0, 0.0}, {0.0, 1.0, 1.0, 0.0}, {0.0, 1.0, 1.0, 2.0}}, dev).t();
    all = linear_backward(gt, x, wt, {true, true, false});
    check_values(all[0], {2, 3}, gx);
    check_values(all[1], {4, 3}, gw);
    CHECK_FALSE(all[2].defined());
    // Mismatched shapes: matmul's error.
    CHECK_THROWS_AS(linear_backward(g, x, w.t(), {true, true, true}), ShapeError);
  }
}

TEST_CASE("a CPU gemm_pair computes both products and hands back an error from either") {
  // The second product has no floating dtype: its thread's error comes back to the caller as
  // the InternalError gemm() raises, after the first product was written.
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    const Tensor a = iota({3, 2}, kCPU), b = iota({2, 4}, kCPU);
    Tensor c = zeros({3, 4});
    kernels::GemmArgs first;
    first.m = 3, first.n = 4, first.k = 2, first.ldc = 4;
    first.a = {a.data_ptr(), 2, 1, 0};
    first.b = {b.data_ptr(), 4, 1, 0};
    first.c = c.data_ptr();
    kernels::GemmArgs second = first;
    Tensor c2 = zeros({3, 4});
    second.c = c2.data_ptr();
    kernels::cpu_backend().gemm_pair(first, second);
    const std::vector<double> want =
        reference_bmm(a.to_vector<double>(), b.to_vector<double>(), 1, 3, 2, 4);
    check_values(c, {3, 4}, want);
    check_values(c2, {3, 4}, want);
    c = zeros({3, 4});
    first.c = c.data_ptr();
    second.dtype = kInt64;
    CHECK_THROWS_AS(kernels::cpu_backend().gemm_pair(first, second), InternalError);
    check_values(c, {3, 4}, want);
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("float64 and float16 products are within tolerance") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = iota({5, 7}, dev, 0.1);
    const Tensor b = iota({7, 3}, dev, -0.05);
    const std::vector<double> expected =
        reference_bmm(a.to_vector<double>(), b.to_vector<double>(), 1, 5, 7, 3);
    const Tensor c64 = mm(a.to(kFloat64), b.to(kFloat64));
    CHECK_EQ(c64.dtype(), kFloat64);
    check_values(c64, {5, 3}, expected, 1e-5);
    const Tensor c16 = mm(a.to(kFloat16), b.to(kFloat16));
    CHECK_EQ(c16.dtype(), kFloat16);
    // Inputs rounded to half (relative 2^-11), sums of 7 products up to ~8: a few 1e-2.
    check_values(c16, {5, 3}, expected, 0.05);
    check_values(matmul(a.to(kFloat16).t(), iota({5, 2}, dev).to(kFloat16)), {7, 2},
                 reference_bmm(a.t().contiguous().to_vector<double>(),
                               iota({5, 2}, dev).to_vector<double>(), 1, 7, 5, 2),
                 0.15);  // results up to 64, where half's spacing is 0.0625
    check_values(linear(a.to(kFloat16), b.t().to(kFloat16).contiguous()), {5, 3}, expected, 0.05);
  }
}

TEST_CASE("larger random products match a reference in every layout") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = randn({37, 53}, TensorOptions(kFloat64).with_device(dev));
    const Tensor b = randn({53, 29}, TensorOptions(kFloat64).with_device(dev));
    const std::vector<double> expected =
        reference_bmm(a.to_vector<double>(), b.to_vector<double>(), 1, 37, 53, 29);
    check_values(mm(a, b), {37, 29}, expected, 1e-9);
    check_values(mm(a.t().contiguous().t(), b.t().contiguous().t()), {37, 29}, expected, 1e-9);
    check_values(mm(a.to(kFloat32), b.to(kFloat32)), {37, 29}, expected, 1e-4);
  }
}

TEST_CASE(
    "a tall product cut into row bands, one per thread, has the values and bits of one call") {
  // kernels/cpu/gemm.cpp cuts a product with at least 512 rows per thread and twice as many rows
  // as columns into one band of rows per thread: 2080 rows make bands of 1056 and 1024 on 2
  // threads; with one thread, one call. (Without the bands the bits would differ: OpenBLAS's
  // own two threads sum some elements in another order than its single thread does.)
  const int threads_before = omp_get_max_threads();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (bool transposed_a : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(transposed_a);
      const TensorOptions options(dtype);
      const Tensor a = transposed_a ? randn({64, 2080}, options).t() : randn({2080, 64}, options);
      const Tensor b = randn({64, 40}, options);
      omp_set_num_threads(1);
      const Tensor one_call = mm(a, b);
      omp_set_num_threads(2);
      const Tensor banded = mm(a, b);
      omp_set_num_threads(threads_before);
      check_values(
          banded, {2080, 40},
          reference_bmm(a.contiguous().to_vector<double>(), b.to_vector<double>(), 1, 2080, 64, 40),
          dtype == kFloat32 ? 1e-4 : 1e-10);
#if MEMGRAD_WITH_BLAS
      // OpenBLAS cuts neither way along k, so each element is the same sum in the same order.
      CHECK(std::memcmp(banded.data_ptr(), one_call.data_ptr(), banded.nbytes()) == 0);
#endif
    }
  }
}

TEST_CASE("batched float32 products with transposed operands match a reference") {
  // 2 x 3 products of 7 x 24 x 16, small enough to run one per thread, with A and B each as a
  // transposed view (the layouts attention's q k^T and its gradients take).
  manual_seed(11);
  const Tensor a = randn({2, 3, 7, 16}), at = randn({2, 3, 16, 7}).transpose(-2, -1);
  const Tensor b = randn({2, 3, 16, 24}), bt = randn({2, 3, 24, 16}).transpose(-2, -1);
  for (const Tensor* lhs : {&a, &at}) {
    for (const Tensor* rhs : {&b, &bt}) {
      const std::vector<double> expected =
          reference_bmm(lhs->contiguous().to_vector<double>(),
                        rhs->contiguous().to_vector<double>(), 6, 7, 16, 24);
      check_values(matmul(*lhs, *rhs), {2, 3, 7, 24}, expected, 1e-5);
    }
  }
}

TEST_CASE("empty inner dimension gives zeros and empty outer dims give empty results") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    check_values(mm(zeros({2, 0}, dev), zeros({0, 3}, dev)), {2, 3}, {0, 0, 0, 0, 0, 0});
    check_values(addmm(tensor({1.0, 2.0, 3.0}, dev), zeros({2, 0}, dev), zeros({0, 3}, dev), 2.0),
                 {2, 3}, {2, 4, 6, 2, 4, 6});
    check_values(mm(zeros({0, 4}, dev), zeros({4, 3}, dev)), {0, 3}, {});
    check_values(matmul(zeros({2, 0, 4}, dev), zeros({4, 3}, dev)), {2, 0, 3}, {});
  }
}

TEST_CASE("a CPU product with beta 0 writes C's m x n elements and nothing between its rows") {
  // C is every row's first n of ldc floats, NaN beforehand: beta 0 must not read them (no NaN in
  // the result) and the product must not write the ldc - n floats after each row. 2048 rows
  // take the row-band path on two or more threads, 4 rows a single call.
  for (int64_t m : {4, 2048}) {
    CAPTURE(m);
    const int64_t n = 6, k = 3, ldc = 10;
    const Tensor a = iota({m, k}, kCPU, 0.5);
    const Tensor b = iota({k, n}, kCPU);
    Tensor c = full({m, ldc}, std::numeric_limits<double>::quiet_NaN());
    kernels::GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.ldc = ldc, g.beta = 0.0;
    g.a = {a.data_ptr(), k, 1, 0};
    g.b = {b.data_ptr(), n, 1, 0};
    g.c = c.data_ptr();
    kernels::cpu_backend().gemm(g);
    const std::vector<double> want =
        reference_bmm(a.to_vector<double>(), b.to_vector<double>(), 1, m, k, n);
    const std::vector<double> got = c.to_vector<double>();
    int64_t wrong = 0, written_outside = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const double v = got[static_cast<size_t>(i * ldc + j)];
        if (j < n && v != want[static_cast<size_t>(i * n + j)]) ++wrong;
        if (j >= n && !std::isnan(v)) ++written_outside;
      }
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(written_outside, 0);
  }
}

TEST_CASE("mm_out and matmul_out write into out without allocating") {
  for (Device dev : devices_under_test()) {
    CAPTURE(dev.str());
    const Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, dev);
    const Tensor b = tensor({{7.0, 8.0}, {9.0, 10.0}, {11.0, 12.0}}, dev);
    Tensor out = empty({2, 2}, dev);
    const uint32_t version = out.version();
    const int64_t before = allocations_made(dev);
    mm_out(out, a, b);
    CHECK_EQ(allocations_made(dev) - before, 0);
    CHECK_EQ(out.version(), version + 1);
    check_values(out, {2, 2}, {58, 64, 139, 154});
    Tensor vec = empty({2}, dev);
    matmul_out(vec, a, tensor({1.0, 1.0, 1.0}, dev));
    check_values(vec, {2}, {6, 15});
    // An out of the wrong size is resized (one allocation); a transposed out view is written
    // through a temporary.
    Tensor small = empty({1}, dev);
    matmul_out(small, a, b);
    check_values(small, {2, 2}, {58, 64, 139, 154});
    Tensor base = zeros({2, 2}, dev);
    Tensor tview = base.t();
    mm_out(tview, a, b);
    check_values(base, {2, 2}, {58, 139, 64, 154});
  }
}

TEST_CASE("matrix product errors name the op and the shapes") {
  const Tensor a = zeros({2, 3});
  const Tensor b = zeros({4, 5});
  CHECK_THROWS_WITH_AS(
      mm(a, b), doctest::Contains("[mm] mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
      ShapeError);
  CHECK_THROWS_WITH_AS(mm(zeros({3}), b), doctest::Contains("[mm] mat1 must be a matrix"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(mm(a, zeros({3, 2}, kFloat64)),
                       doctest::Contains("[mm] expected both operands to have the same dtype, but "
                                         "got float32 and float64"),
                       DTypeError);
  const auto mixed = caught<DTypeError>([&] { (void)mm(a, zeros({3, 2}, kFloat64)); });
  REQUIRE(mixed);
  CHECK_EQ(mixed->op(), "mm");
  check_dtypes(mixed->dtypes(), {kFloat32, kFloat64});
  CHECK_THROWS_WITH_AS(mm(zeros({2, 3}, kInt64), zeros({3, 2}, kInt64)),
                       doctest::Contains("[mm] matrix products need floating-point operands, got "
                                         "int64"),
                       DTypeError);
  check_device_error([&] { (void)mm(a, zeros({3, 2}, Device("sim:0"))); }, "mm", {"cpu", "sim:0"});
  CHECK_THROWS_WITH_AS(matmul(a, b),
                       doctest::Contains("[matmul] shapes [2, 3] and [4, 5] cannot be multiplied "
                                         "(3 != 4)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(matmul(zeros({}), b),
                       doctest::Contains("[matmul] both arguments to matmul need to be at least "
                                         "1D, but they are 0D and 2D"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 2, 3}), zeros({3, 3, 1})),
                       doctest::Contains("[matmul] batch dims of shapes [2, 2, 3] and [3, 3, 1] "
                                         "cannot be broadcast"),
                       ShapeError);
  const auto batch1 = caught<ShapeError>([&] { (void)bmm(a, b); });
  REQUIRE(batch1);
  CHECK_EQ(batch1->op(), "bmm");
  check_shape(batch1->actual(), {2, 3}, "actual");
  CHECK_THROWS_WITH_AS(bmm(zeros({2, 2, 3}), zeros({3, 3, 1})),
                       doctest::Contains("[bmm] batch1 and batch2 shapes cannot be multiplied "
                                         "([2, 2, 3] and [3, 3, 1])"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(addmm(zeros({3}), a, zeros({3, 2})),
                       doctest::Contains("[addmm] shapes [3] and [2, 2] cannot be broadcast"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(linear(a, zeros({5, 4})),
                       doctest::Contains("[linear] mat1 and mat2 shapes cannot be multiplied (2x3 "
                                         "and 4x5)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(linear(a, zeros({5, 3}), zeros({4})),
                       doctest::Contains("[linear] shapes [4] and [2, 5] cannot be broadcast"),
                       ShapeError);
  const auto weight = caught<ShapeError>([&] { (void)linear(a, zeros({3})); });
  REQUIRE(weight);
  CHECK_EQ(weight->op(), "linear");
  check_shape(weight->actual(), {3}, "actual");
  Tensor out = zeros({2, 2}, kFloat64);
  CHECK_THROWS_WITH_AS(mm_out(out, a, zeros({3, 2})),
                       doctest::Contains("[mm_out] out has dtype float64 but the result has dtype "
                                         "float32"),
                       DTypeError);
}

TEST_CASE("a matrix product's ShapeError carries both operand shapes") {
  // mm names the matrices as PyTorch does (2x3 and 4x5); the fields hold them as shapes.
  const auto e = caught<ShapeError>([] { (void)mm(zeros({2, 3}), zeros({4, 5})); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "mm");
  check_shape(e->lhs(), {2, 3}, "lhs");
  check_shape(e->rhs(), {4, 5}, "rhs");
  const auto batched = caught<ShapeError>([] { (void)matmul(zeros({2, 2, 3}), zeros({3, 3, 1})); });
  REQUIRE(batched);
  CHECK_EQ(batched->op(), "matmul");
  check_shape(batched->lhs(), {2, 2, 3}, "lhs");
  check_shape(batched->rhs(), {3, 3, 1}, "rhs");
  const auto bias = caught<ShapeError>([] {
    (void)linear(zeros({2, 3}), zeros({5, 3}), zeros({4}));
  });
  REQUIRE(bias);
  CHECK_EQ(bias->op(), "linear");
  check_shape(bias->lhs(), {4}, "lhs");
  check_shape(bias->rhs(), {2, 5}, "rhs");
}

}  // TEST_SUITE("engine")
