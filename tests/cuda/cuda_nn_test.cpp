// CUDA against CPU for the index, random, nn and optimizer kernel families: index_select,
// gather, scatter_add, index_add, masked_fill, one_hot and their bounds reports; Philox draws
// (bit-identical except normal, within 2 ulp of float64); layer norm forward and backward on the
// warp and block paths; cross entropy with ignore_index and label smoothing; fused SGD and Adam.
#include <doctest/doctest.h>

#include "tests/cuda/cuda_twin.h"

using namespace memgrad;
using namespace memgrad::testing;

namespace {

// An int64 index twin with the given values.
Twin index_twin(std::vector<int64_t> values, const Shape& sizes) {
  return twin(from_vector(values, sizes));
}

}  // namespace

TEST_SUITE("cuda") {

TEST_CASE("index_select and gather copy the same elements as on the CPU") {
  for (DType dtype : {kFloat32, kFloat16, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Twin in = twin(random_tensor({6, 7}, dtype, -9, 9, 141));
    const Twin idx = index_twin({5, 0, 5, 2}, {4});
    for (int dim : {0, 1}) {
      CAPTURE(dim);
      Twin out = output_twin(dim == 0 ? Shape{4, 7} : Shape{6, 4}, dtype);
      const auto c = cpu_kernels().index_select(arg(out.cpu), arg(in.cpu), arg(idx.cpu), dim);
      const auto g = cuda_kernels().index_select(arg(out.gpu), arg(in.gpu), arg(idx.gpu), dim);
      CHECK(c.ok);
      CHECK(g.ok);
      check_equal(out, "index_select");
    }
    const Twin gidx = twin(random_tensor({6, 5}, kInt64, 0, 7, 142));
    Twin out = output_twin({6, 5}, dtype);
    cpu_kernels().gather(arg(out.cpu), arg(in.cpu), arg(gidx.cpu), 1);
    cuda_kernels().gather(arg(out.gpu), arg(in.gpu), arg(gidx.gpu), 1);
    check_equal(out, "gather");
  }
}

TEST_CASE("scatter_add and index_add accumulate duplicates like the CPU") {
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    CAPTURE(dtype_name(dtype));
    Twin self = twin(random_tensor({5, 8}, dtype, -3, 3, 151));
    const Twin src = twin(random_tensor({5, 6}, dtype, -3, 3, 152));
    const Twin idx = twin(random_tensor({5, 6}, kInt64, 0, 8, 153));  // duplicates likely
    cpu_kernels().scatter_add(arg(self.cpu), arg(idx.cpu), arg(src.cpu), 1);
    cuda_kernels().scatter_add(arg(self.gpu), arg(idx.gpu), arg(src.gpu), 1);
    // Atomic additions run in any order: float32 may differ in the last bits.
    check_close(self, dtype == kFloat32 ? 1e-6 : 1e-14, 1e-6, "scatter_add");
    const Twin rows = index_twin({4, 0, 4}, {3});
    const Twin add = twin(random_tensor({3, 8}, dtype, -3, 3, 154));
    cpu_kernels().index_add(arg(self.cpu), arg(rows.cpu), arg(add.cpu), 0);
    cuda_kernels().index_add(arg(self.gpu), arg(rows.gpu), arg(add.gpu), 0);
    check_close(self, dtype == kFloat32 ? 1e-6 : 1e-14, 1e-6, "index_add");
  }
  // int64 sums stay exact beyond 2^53, where float64 would round: 2 x (2^53 + 1) in one element.
  const int64_t big = (int64_t{1} << 53) + 1;
  Twin self = twin(zeros({2, 3}, kInt64));
  const Twin big_src = twin(from_vector(std::vector<int64_t>{big, big, big, 3}, {2, 2}));
  const Twin idx = index_twin({0, 0, 2, 1}, {2, 2});
  cpu_kernels().scatter_add(arg(self.cpu), arg(idx.cpu), arg(big_src.cpu), 1);
  cuda_kernels().scatter_add(arg(self.gpu), arg(idx.gpu), arg(big_src.gpu), 1);
  check_equal_int64(self, "int64 scatter_add beyond 2^53");
  Twin rows = twin(zeros({2, 2}, kInt64));
  const Twin both_to_one = index_twin({1, 1}, {2});
  cpu_kernels().index_add(arg(rows.cpu), arg(both_to_one.cpu), arg(big_src.cpu), 0);
  cuda_kernels().index_add(arg(rows.gpu), arg(both_to_one.gpu), arg(big_src.gpu), 0);
  check_equal_int64(rows, "int64 index_add beyond 2^53");
}

TEST_CASE("masked_fill and one_hot match the CPU") {
  for (DType dtype : {kFloat32, kFloat16, kInt64}) {
    CAPTURE(dtype_name(dtype));
    Twin self = twin(random_tensor({9, 4}, dtype, -3, 3, 161));
    const Twin mask = twin(random_tensor({1, 4}, kBool, 0, 1, 162));
    cpu_kernels().masked_fill(arg(self.cpu), arg(mask.cpu.expand({9, 4})), -0.3);
    cuda_kernels().masked_fill(arg(self.gpu), arg(mask.gpu.expand({9, 4})), -0.3);
    check_equal(self, "masked_fill");
  }
  // An int64 masked_fill of values int64 cannot hold converts as the CPU's cast_to does.
  for (double value : {std::nan(""), -std::numeric_limits<double>::infinity(), 1e19}) {
    CAPTURE(value);
    Twin self = twin(random_tensor({9, 4}, kInt64, -3, 3, 163));
    const Twin mask = twin(random_tensor({9, 4}, kBool, 0, 1, 164));
    cpu_kernels().masked_fill(arg(self.cpu), arg(mask.cpu), value);
    cuda_kernels().masked_fill(arg(self.gpu), arg(mask.gpu), value);
    check_equal_int64(self, "int64 masked_fill out of range");
  }
  const Twin labels = index_twin({3, 0, 4, 4, 1, 2}, {2, 3});
  Twin out = output_twin({2, 3, 5}, kInt64);
  cpu_kernels().one_hot(arg(out.cpu), arg(labels.cpu));
  cuda_kernels().one_hot(arg(out.gpu), arg(labels.gpu));
  check_equal(out, "one_hot");
}

TEST_CASE("a bad index is reported with its value and position and nothing is written") {
  const Twin in = twin(random_tensor({4, 3}, kFloat32, -1, 1, 171));
  const Twin idx = index_twin({1, 3, 4, -1, 9}, {5});  // first bad: 4 at position 2
  Twin out = output_twin({5, 3}, kFloat32);
  const kernels::IndexCheck c =
      cpu_kernels().index_select(arg(out.cpu), arg(in.cpu), arg(idx.cpu), 0);
  const kernels::IndexCheck g =
      cuda_kernels().index_select(arg(out.gpu), arg(in.gpu), arg(idx.gpu), 0);
  CHECK_FALSE(g.ok);
  CHECK_EQ(g.value, c.value);
  CHECK_EQ(g.position, c.position);
  CHECK_EQ(g.value, 4);
  CHECK_EQ(g.position, 2);
  check_equal(out, "untouched output");  // still the sentinel on both sides
  // Through the engine the report becomes an IndexError naming the op.
  CHECK_THROWS_AS(index_select(in.gpu, 0, idx.gpu), IndexError);
}

TEST_CASE("Philox draws are identical to the CPU's (normal within 2 ulp of float64)") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Shape shape{1001};  // not a multiple of 4: the last Philox block is partial
    Twin u = output_twin(shape, dtype);
    cpu_kernels().uniform(arg(u.cpu), 42, 7, -3.0, 5.0);
    cuda_kernels().uniform(arg(u.gpu), 42, 7, -3.0, 5.0);
    check_equal(u, "uniform");
    Twin b = output_twin(shape, dtype);
    cpu_kernels().bernoulli(arg(b.cpu), 42, 8, 0.3);
    cuda_kernels().bernoulli(arg(b.gpu), 42, 8, 0.3);
    check_equal(b, "bernoulli");
    if (dtype != kBool) {
      Twin r = output_twin(shape, dtype);
      cpu_kernels().randint(arg(r.cpu), 42, 9, -100, 100);
      cuda_kernels().randint(arg(r.gpu), 42, 9, -100, 100);
      check_equal(r, "randint");
    }
    if (is_floating(dtype)) {
      Twin n = output_twin(shape, dtype);
      cpu_kernels().normal(arg(n.cpu), 42, 10, 1.0, 2.0);
      cuda_kernels().normal(arg(n.gpu), 42, 10, 1.0, 2.0);
      // log, sin and cos differ from glibc's by up to 2 ulp of float64; rounded to float32 or
      // float16 that is at most one unit of the last place.
      check_close(n, dtype == kFloat64 ? 1e-14 : dtype == kFloat32 ? 2e-7 : 1e-3, 1e-14, "normal");
    }
  }
  // Through the engine: the same seed gives the same tensor on cpu and cuda:0.
  manual_seed(5);
  const Tensor on_cpu = rand({513});
  manual_seed(5);
  const Tensor on_gpu = rand({513}, kCuda0);
  check_close(on_cpu, on_gpu, 0.0, 0.0, "rand through the engine");
}

TEST_CASE("layer norm forward and backward match the CPU on the warp and block paths") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (int64_t n : {512, 3000}) {
      for (bool affine : {true, false}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(n);
        CAPTURE(affine);
        const int64_t rows = 37;
        const DType stat = dtype == kFloat64 ? kFloat64 : kFloat32;
        const Twin x = twin(random_tensor({rows, n}, dtype, -3, 3, 181));
        const Twin w = twin(random_tensor({n}, dtype, 0.5, 1.5, 182));
        const Twin b = twin(random_tensor({n}, dtype, -1, 1, 183));
        auto weight = [&](const Tensor& t) { return affine ? arg(t) : kernels::Operand{}; };
        Twin y = output_twin({rows, n}, dtype), mean = output_twin({rows}, stat),
             rstd = output_twin({rows}, stat);
        cpu_kernels().layer_norm(arg(y.cpu), arg(mean.cpu), arg(rstd.cpu), arg(x.cpu),
                                 weight(w.cpu), weight(b.cpu), rows, n, 1e-5);
        cuda_kernels().layer_norm(arg(y.gpu), arg(mean.gpu), arg(rstd.gpu), arg(x.gpu),
                                  weight(w.gpu), weight(b.gpu), rows, n, 1e-5);
        check_close(mean, 1e-6, 1e-7, "layer_norm mean");
        check_close(rstd, 1e-6, 0.0, "layer_norm rstd");
        check_close(y, rtol_for(dtype), rtol_for(dtype) * 0.1, "layer_norm y");
        const Twin dy = twin(random_tensor({rows, n}, dtype, -1, 1, 184));
        Twin dx = output_twin({rows, n}, dtype), dw = output_twin({n}, dtype),
             db = output_twin({n}, dtype);
        cpu_kernels().layer_norm_backward(arg(dx.cpu), weight(dw.cpu), weight(db.cpu), arg(dy.cpu),
                                          arg(x.cpu), arg(mean.cpu), arg(rstd.cpu), weight(w.cpu),
                                          rows, n);
        cuda_kernels().layer_norm_backward(arg(dx.gpu), weight(dw.gpu), weight(db.gpu), arg(dy.gpu),
                                           arg(x.gpu), arg(mean.cpu.to(kCuda0)),
                                           arg(rstd.cpu.to(kCuda0)), weight(w.gpu), rows, n);
        check_close(dx, rtol_for(dtype) * 5, rtol_for(dtype) * 0.1, "layer_norm dx");
        check_close(dw, rtol_for(dtype), rtol_for(dtype) * 0.1, "layer_norm dweight");
        check_close(db, rtol_for(dtype), rtol_for(dtype) * 0.1, "layer_norm dbias");
      }
    }
  }
}

TEST_CASE("cross entropy forward and backward match the CPU, ignored rows and smoothing") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (int64_t classes : {10, 3000}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(classes);
      const int64_t rows = 64;
      const Twin logits = twin(random_tensor({rows, classes}, dtype, -5, 5, 191));
      Tensor t = random_tensor({rows}, kInt64, 0, static_cast<double>(classes), 192);
      t.narrow(0, 3, 1).fill_(-100);  // an ignored row
      const Twin target = twin(t);
      Twin loss = output_twin({rows}, dtype), lp = output_twin({rows, classes}, dtype);
      const auto c = cpu_kernels().cross_entropy(arg(loss.cpu), arg(lp.cpu), arg(logits.cpu),
                                                 arg(target.cpu), -100, 0.1);
      const auto g = cuda_kernels().cross_entropy(arg(loss.gpu), arg(lp.gpu), arg(logits.gpu),
                                                  arg(target.gpu), -100, 0.1);
      CHECK(c.ok);
      CHECK(g.ok);
      check_close(lp, rtol_for(dtype), rtol_for(dtype) * 0.1, "log_probs");
      check_close(loss, rtol_for(dtype), rtol_for(dtype) * 0.1, "loss");
      const Twin grad_loss = twin(full({1}, 1.0, dtype));
      Twin grad = output_twin({rows, classes}, dtype);
      const Tensor gl_cpu = grad_loss.cpu.expand({rows}), gl_gpu = grad_loss.gpu.expand({rows});
      cpu_kernels().cross_entropy_backward(arg(grad.cpu), arg(gl_cpu), arg(lp.cpu), arg(target.cpu),
                                           -100, 0.1, 1.0 / rows);
      cuda_kernels().cross_entropy_backward(arg(grad.gpu), arg(gl_gpu), arg(lp.cpu.to(kCuda0)),
                                            arg(target.gpu), -100, 0.1, 1.0 / rows);
      check_close(grad, rtol_for(dtype), rtol_for(dtype) * 1e-3, "grad_logits");
    }
  }
  // A target out of range other than ignore_index: the first bad row, nothing written.
  const Twin logits = twin(random_tensor({3, 4}, kFloat32, -1, 1, 193));
  const Twin target = index_twin({1, 7, -100}, {3});
  Twin loss = output_twin({3}, kFloat32), lp = output_twin({3, 4}, kFloat32);
  const auto g = cuda_kernels().cross_entropy(arg(loss.gpu), arg(lp.gpu), arg(logits.gpu),
                                              arg(target.gpu), -100, 0.0);
  CHECK_FALSE(g.ok);
  CHECK_EQ(g.value, 7);
  CHECK_EQ(g.position, 1);
  check_equal(lp, "log_probs untouched");
}

TEST_CASE("fused SGD and Adam steps match the CPU") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    const int64_t n = 10007;
    Twin p = twin(random_tensor({n}, dtype, -1, 1, 201));
    Twin buf = output_twin({n}, dtype, 0.0);
    for (int step = 0; step < 3; ++step) {
      const Twin grad = twin(random_tensor({n}, dtype, -1, 1, 202 + step));
      cpu_kernels().sgd_step(arg(p.cpu), arg(grad.cpu), arg(buf.cpu), 0.1, 0.9, 0.1, 1e-4, true,
                             step == 0);
      cuda_kernels().sgd_step(arg(p.gpu), arg(grad.gpu), arg(buf.gpu), 0.1, 0.9, 0.1, 1e-4, true,
                              step == 0);
    }
    check_equal(p, "sgd param");
    check_equal(buf, "sgd momentum buffer");
    Twin q = twin(random_tensor({n}, dtype, -1, 1, 211));
    Twin m1 = output_twin({n}, dtype, 0.0), m2 = output_twin({n}, dtype, 0.0);
    for (int step = 1; step <= 3; ++step) {
      const Twin grad = twin(random_tensor({n}, dtype, -1, 1, 212 + step));
      for (bool decoupled : {false, true}) {
        cpu_kernels().adam_step(arg(q.cpu), arg(grad.cpu), arg(m1.cpu), arg(m2.cpu), 1e-3, 0.9,
                                0.999, 1e-8, 1e-2, decoupled, step);
        cuda_kernels().adam_step(arg(q.gpu), arg(grad.gpu), arg(m1.gpu), arg(m2.gpu), 1e-3, 0.9,
                                 0.999, 1e-8, 1e-2, decoupled, step);
      }
    }
    // The GPU rounds every product and sum as the CPU does (no fused multiply-adds).
    check_equal(q, "adam param");
    check_equal(m2, "adam second moment");
  }
}

}  // TEST_SUITE("cuda")
