// Every differentiable op against central differences in float64, including non-contiguous
// and broadcast inputs, views, and chains of in-place ops on non-leaves.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "autograd/autograd.h"
#include "engine/nn/functional.h"

using namespace memgrad;
using autograd::gradcheck;
using Inputs = std::vector<Tensor>;

namespace {

// A float64 leaf of `sizes` with values in [lo, hi), from a fixed seed.
Tensor leaf(const Shape& sizes, double lo = -1.0, double hi = 1.0, uint64_t seed = 1) {
  Generator g(seed);
  Tensor t = rand(sizes, TensorOptions(kFloat64), &g) * (hi - lo) + lo;
  t = t.detach();
  t.requires_grad_();
  return t;
}

void check(const std::string& name, const autograd::TestFunction& fn, const Inputs& inputs) {
  CAPTURE(name);
  const autograd::GradcheckResult r = gradcheck(fn, inputs, name);
  CHECK_MESSAGE(r.ok, r.report);
}

}  // namespace

TEST_SUITE("autograd") {

TEST_CASE("gradcheck: binary elementwise ops with broadcasting") {
  const Tensor a = leaf({2, 3}, -1, 1, 1), b = leaf({3}, 0.5, 1.5, 2), c = leaf({2, 1}, 0.5, 2, 3);
  check("add", [](const Inputs& x) { return add(x[0], x[1], 2.5); }, {a, b});
  check("sub", [](const Inputs& x) { return sub(x[0], x[1], 0.5); }, {a, c});
  check("mul", [](const Inputs& x) { return x[0] * x[1]; }, {a, b});
  check("div", [](const Inputs& x) { return x[0] / x[1]; }, {a, c});
  check("pow", [](const Inputs& x) { return pow(x[0], x[1]); }, {leaf({2, 3}, 0.5, 2, 4), b});
  check("maximum", [](const Inputs& x) { return maximum(x[0], x[1]); }, {a, b});
  check("minimum", [](const Inputs& x) { return minimum(x[0], x[1]); }, {a, c});
  check("where", [](const Inputs& x) { return where(x[0].gt(0.0), x[0], x[1]); }, {a, b});
}

TEST_CASE("gradcheck: scalar elementwise ops") {
  const Tensor a = leaf({4}, 0.5, 2.0);
  check("add scalar", [](const Inputs& x) { return x[0] + 3.0; }, {a});
  check("mul scalar", [](const Inputs& x) { return x[0] * -2.0; }, {a});
  check("div scalar", [](const Inputs& x) { return x[0] / 4.0; }, {a});
  check("rdiv", [](const Inputs& x) { return 3.0 / x[0]; }, {a});
  check("rsub", [](const Inputs& x) { return 3.0 - x[0]; }, {a});
  check("pow scalar", [](const Inputs& x) { return pow(x[0], 2.5); }, {a});
  check("clamp", [](const Inputs& x) { return clamp(x[0], 0.8, 1.6); }, {a});
}

TEST_CASE("gradcheck: unary ops on contiguous and strided inputs") {
  const Tensor pos = leaf({3, 4}, 0.2, 2.0, 5);
  const Tensor any = leaf({3, 4}, -2.0, 2.0, 6);
  using Op = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> positive = {
      {"log", [](const Tensor& t) { return log(t); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }},
  };
  const std::vector<std::pair<std::string, Op>> anywhere = {
      {"neg", [](const Tensor& t) { return neg(t); }},
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"abs", [](const Tensor& t) { return abs(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, true); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"square", [](const Tensor& t) { return square(t); }},
  };
  for (const auto& [name, op] : positive) {
    check(name, [op](const Inputs& x) { return op(x[0]); }, {pos});
    check(name + " (transposed)", [op](const Inputs& x) { return op(x[0].t()); }, {pos});
  }
  for (const auto& [name, op] : anywhere) {
    check(name, [op](const Inputs& x) { return op(x[0]); }, {any});
    check(name + " (sliced, step 2)", [op](const Inputs& x) { return op(x[0].slice(1, 0, 4, 2)); },
          {any});
    check(name + " (expanded)",
          [op](const Inputs& x) {
            return op(x[0].select(0, 1).unsqueeze(0).expand({3, 4}));
          },
          {any});
  }
}

TEST_CASE("gradcheck: reductions") {
  const Tensor a = leaf({2, 3, 4}, -1, 1, 7);
  check("sum all", [](const Inputs& x) { return x[0].sum(); }, {a});
  check("sum dims", [](const Inputs& x) { return x[0].sum({0, 2}); }, {a});
  check("sum keepdim", [](const Inputs& x) { return x[0].sum({1}, true); }, {a});
  check("mean", [](const Inputs& x) { return x[0].mean({-1}); }, {a});
  check("mean all", [](const Inputs& x) { return x[0].mean(); }, {a});
  check("var", [](const Inputs& x) { return x[0].var({1}); }, {a});
  check("var all, correction 0", [](const Inputs& x) { return x[0].var({}, 0); }, {a});
  check("std", [](const Inputs& x) { return x[0].std({2}, 1, true); }, {a});
  check("max dim", [](const Inputs& x) { return x[0].max(1).first; }, {a});
  check("min dim keepdim", [](const Inputs& x) { return x[0].min(-1, true).first; }, {a});
  check("max all", [](const Inputs& x) { return x[0].max(); }, {a});
  check("amax", [](const Inputs& x) { return x[0].amax({0, 1}); }, {a});
  check("logsumexp", [](const Inputs& x) { return x[0].logsumexp({2}); }, {a});
  check("norm 2", [](const Inputs& x) { return x[0].norm(2.0, {1}); }, {a});
  check("norm 1", [](const Inputs& x) { return x[0].norm(1.0); }, {a});
  check("norm 3", [](const Inputs& x) { return x[0].norm(3.0, {2}); }, {a});
  check("reductions of a transposed input",
        [](const Inputs& x) { return x[0].transpose(0, 2).sum({1}); }, {a});
}

TEST_CASE("gradcheck: max with ties shares the gradient evenly, as PyTorch") {
  Tensor t = tensor({1.0, 3.0, 3.0, 2.0}, kFloat64);
  t.requires_grad_();
  t.max().backward();
  const std::vector<double> g = t.grad().to_vector<double>();
  CHECK_EQ(g, std::vector<double>{0.0, 0.5, 0.5, 0.0});
  Tensor u = tensor({{1.0, 3.0, 3.0}}, kFloat64);
  u.requires_grad_();
  u.max(1).first.sum().backward();  // along a dim: the first maximum takes it all
  CHECK_EQ(u.grad().to_vector<double>(), std::vector<double>{0.0, 1.0, 0.0});
}

TEST_CASE("gradcheck: softmax and log_softmax over each dim") {
  const Tensor a = leaf({3, 4}, -2, 2, 8);
  for (int dim : {0, 1, -1}) {
    CAPTURE(dim);
    check("softmax", [dim](const Inputs& x) { return softmax(x[0], dim); }, {a});
    check("log_softmax", [dim](const Inputs& x) { return log_softmax(x[0], dim); }, {a});
  }
  check("softmax of a transposed input", [](const Inputs& x) { return softmax(x[0].t(), 1); }, {a});
}

TEST_CASE("gradcheck: matrix products") {
  const Tensor a = leaf({3, 4}, -1, 1, 9), b = leaf({4, 2}, -1, 1, 10);
  const Tensor ba = leaf({2, 3, 4}, -1, 1, 11), bb = leaf({2, 4, 5}, -1, 1, 12);
  const Tensor bias = leaf({2}, -1, 1, 13), v = leaf({4}, -1, 1, 14);
  check("mm", [](const Inputs& x) { return mm(x[0], x[1]); }, {a, b});
  check("mm transposed", [](const Inputs& x) { return mm(x[1].t(), x[0].t()); }, {a, b});
  check("bmm", [](const Inputs& x) { return bmm(x[0], x[1]); }, {ba, bb});
  check("matmul 2d @ 1d", [](const Inputs& x) { return matmul(x[0], x[1]); }, {a, v});
  check("matmul 1d @ 2d", [](const Inputs& x) { return matmul(x[1], x[0]); }, {b, v});
  check("matmul 1d @ 1d", [](const Inputs& x) { return matmul(x[0], x[0]); }, {v});
  check("matmul broadcast", [](const Inputs& x) { return matmul(x[0], x[1]); }, {ba, b});
  check("addmm", [](const Inputs& x) { return addmm(x[2], x[0], x[1], 0.5, 2.0); }, {a, b, bias});
  check("linear", [](const Inputs& x) { return linear(x[0], x[1].t(), x[2]); }, {ba, b, bias});
}

TEST_CASE("gradcheck: views") {
  const Tensor a = leaf({2, 3, 4}, -1, 1, 15);
  check("view", [](const Inputs& x) { return x[0].view({6, 4}) * 2.0; }, {a});
  check("reshape of a transposed",
        [](const Inputs& x) { return x[0].transpose(0, 2).reshape({-1}); }, {a});
  check("slice", [](const Inputs& x) { return x[0].slice(2, 1, 4, 2); }, {a});
  check("narrow", [](const Inputs& x) { return x[0].narrow(1, 1, 2); }, {a});
  check("select", [](const Inputs& x) { return x[0].select(1, -1); }, {a});
  check("permute", [](const Inputs& x) { return x[0].permute({2, 0, 1}); }, {a});
  check("expand",
        [](const Inputs& x) {
          return x[0].select(0, 0).unsqueeze(0).expand({5, 3, 4});
        },
        {a});
  check("squeeze/unsqueeze", [](const Inputs& x) { return x[0].unsqueeze(1).squeeze(1); }, {a});
  check("diagonal", [](const Inputs& x) { return x[0].diagonal(1, 1, 2); }, {a});
  check("as_strided", [](const Inputs& x) { return x[0].as_strided({3, 3}, {4, 1}, 1); }, {a});
  check("as_strided overlapping",
        [](const Inputs& x) {
          return x[0].as_strided({3, 3}, {1, 1}, 0);
        },
        {a});
  check("chunk", [](const Inputs& x) { return x[0].chunk(2, 2)[1]; }, {a});
  check("unbind", [](const Inputs& x) { return x[0].unbind(0)[1]; }, {a});
}

TEST_CASE("gradcheck: index ops and joining") {
  const Tensor a = leaf({4, 3}, -1, 1, 16), b = leaf({2, 3}, -1, 1, 17);
  const Tensor idx = tensor({2, 0, 2});
  const Tensor gidx = from_vector<int64_t>({0, 1, 3, 3, 3, 0}, {2, 3});
  check("index_select (duplicates)", [&](const Inputs& x) { return x[0].index_select(0, idx); },
        {a});
  check("gather", [&](const Inputs& x) { return x[0].t().gather(1, gidx); }, {a});
  check("scatter_add", [&](const Inputs& x) { return scatter_add(x[0], 0, gidx, x[1]); }, {a, b});
  check("embedding",
        [&](const Inputs& x) {
          return embedding(x[0], from_vector<int64_t>({1, 3, 1, 0}, {2, 2}));
        },
        {a});
  check("masked_fill", [](const Inputs& x) { return x[0].masked_fill(x[0].gt(0.0), 2.0); }, {a});
  check("cat", [](const Inputs& x) { return cat({x[0], x[1], x[0]}, 0); }, {a, b});
  check("stack", [](const Inputs& x) { return stack({x[0].slice(0, 0, 2), x[1]}, 1); }, {a, b});
  check("pad", [](const Inputs& x) { return pad(x[0], {1, 2, 0, 1}, 0.5); }, {a});
}

TEST_CASE("gradcheck: casts and copies") {
  const Tensor a = leaf({3}, -1, 1, 18);
  // Through float32 the finite differences need a larger step than float64's default.
  const autograd::GradcheckResult r = gradcheck(
      [](const Inputs& x) { return x[0].to(kFloat32).to(kFloat64) * 3.0; }, {a}, "to", 1e-2, 1e-3);
  CHECK_MESSAGE(r.ok, r.report);
  check("clone", [](const Inputs& x) { return x[0].clone() * x[0]; }, {a});
  check("contiguous of a transposed",
        [](const Inputs& x) {
          return x[0].view({3, 1}).expand({3, 2}).t().contiguous();
        },
        {a});
  check("to another device", [](const Inputs& x) { return x[0].to(Device("sim:0")).exp().cpu(); },
        {a});
}

TEST_CASE("gradcheck: chains of in-place ops on non-leaves") {
  const Tensor a = leaf({2, 3}, 0.5, 1.5, 19), b = leaf({3}, 0.5, 1.5, 20);
  check("add_ mul_ exp_",
        [](const Inputs& x) {
          Tensor h = x[0] * 1.0;
          h.add_(x[1]);
          h.mul_(x[1]);
          h.exp_();
          return h;
        },
        {a, b});
  check("div_ sub_ clamp_ sigmoid_",
        [](const Inputs& x) {
          Tensor h = x[0] + 0.0;
          h.div_(x[1]);
          h.sub_(x[1], 0.5);
          h.clamp_(0.0, 0.9);  // (clamp_ after sigmoid_ would modify sigmoid's saved output:
          h.sigmoid_();        //  PyTorch and memgrad both reject that at backward)
          return h;
        },
        {a, b});
  check("in-place on a view (CopySlices)",
        [](const Inputs& x) {
          Tensor h = x[0] * 2.0;
          h.select(0, 1).mul_(x[1]);
          h.slice(1, 0, 2).tanh_();
          return h;
        },
        {a, b});
  check("copy_ into a slice",
        [](const Inputs& x) {
          Tensor h = zeros({2, 3}, kFloat64);
          h.slice(1, 1, 3).copy_(x[0].slice(1, 0, 2) * 3.0);
          return h * x[0];
        },
        {a});
  check("masked_fill_ and scatter_add_",
        [](const Inputs& x) {
          Tensor h = x[0] * 1.0;
          h.masked_fill_(tensor({true, false, true}, kBool).unsqueeze(0).expand({2, 3}), 0.0);
          h.scatter_add_(1, from_vector<int64_t>({0, 0, 1, 2, 2, 2}, {2, 3}), x[0] * 2.0);
          return h;
        },
        {a});
}

TEST_CASE("gradcheck: nn ops") {
  const Tensor x = leaf({3, 5}, -1, 1, 21), w = leaf({5}, 0.5, 1.5, 22),
               bias = leaf({5}, -1, 1, 23);
  check("layer_norm", [](const Inputs& in) { return nn::layer_norm(in[0], {5}, in[1], in[2]); },
        {x, w, bias});
  check("cross_entropy",
        [](const Inputs& in) {
          return nn::cross_entropy(in[0], tensor({4, 0, 2}));
        },
        {x});
  check("cross_entropy smoothing, ignore_index",
        [](const Inputs& in) {
          return nn::cross_entropy(in[0], tensor({4, -100, 2}), 0.1, -100, nn::Reduction::Sum);
        },
        {x});
  check("mse_loss",
        [](const Inputs& in) {
          return nn::mse_loss(in[0], in[1].unsqueeze(0).expand({3, 5}));
        },
        {x, w});
}

TEST_CASE("gradcheck reports a wrong gradient clearly") {
  // A hook that doubles an intermediate gradient makes the analytic gradient disagree.
  Tensor a = leaf({2}, -1, 1, 24);
  const autograd::GradcheckResult r = gradcheck(
      [](const Inputs& x) {
        Tensor y = x[0] * 1.0;
        if (y.requires_grad()) autograd::register_hook(y, [](const Tensor& g) { return g * 2.0; });
        return exp(y);
      },
      {a}, "exp");
  CHECK_FALSE(r.ok);
  CHECK(r.report.find("gradcheck failed for exp: input 0 (shape [2]), element 0") !=
        std::string::npos);
  CHECK(r.report.find("analytic") != std::string::npos);
}

}  // TEST_SUITE("autograd")
