// Autograd's core behaviour, case by case as PyTorch behaves: recording, accumulation, version
// counters, in-place rules, freeing saved tensors, grad modes, hooks.
#include <doctest/doctest.h>

#include <any>
#include <limits>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::caught;
using memgrad::testing::check_values;
using memgrad::testing::StatsDelta;

namespace {

Tensor leaf(std::initializer_list<double> values) {
  Tensor t = tensor(values);
  t.requires_grad_();
  return t;
}

}  // namespace

TEST_SUITE("autograd") {

TEST_CASE("ops on tensors that require grad record named nodes") {
  Tensor x = leaf({1.0, 2.0});
  CHECK(x.is_leaf());
  CHECK(x.requires_grad());
  CHECK_EQ(x.grad_fn_name(), "");
  Tensor y = x * x;
  CHECK_FALSE(y.is_leaf());
  CHECK(y.requires_grad());
  CHECK_EQ(y.grad_fn_name(), "MulBackward");
  CHECK_EQ(exp(y).grad_fn_name(), "ExpBackward");
  CHECK_EQ((y + 1.0).grad_fn_name(), "AddBackward");
  const Tensor c = tensor({1.0, 2.0});
  CHECK_FALSE((c * 2.0).requires_grad());  // nothing requires grad: nothing recorded
}

TEST_CASE("backward computes the gradient of a chain and accumulates into leaves") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  // z = exp(x) * x  =>  dz/dx = exp(x) (1 + x)
  Tensor z = exp(x) * x;
  z.backward(ones({3}));
  check_values(x.grad(), {3}, {std::exp(1.0) * 2, std::exp(2.0) * 3, std::exp(3.0) * 4}, 1e-5);
  // A second graph: gradients add up in .grad.
  (x * 2.0).backward(ones({3}));
  check_values(x.grad(), {3}, {std::exp(1.0) * 2 + 2, std::exp(2.0) * 3 + 2, std::exp(3.0) * 4 + 2},
               1e-5);
  x.set_grad(Tensor());  // zero_grad(set_to_none=True)
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("gradients arriving at the same tensor from two paths are summed") {
  Tensor x = leaf({2.0});
  Tensor a = x * 3.0;
  Tensor b = a * a + a;  // db/da = 2a + 1, da/dx = 3
  b.backward();
  check_values(x.grad(), {1}, {(2 * 6.0 + 1) * 3});
}

TEST_CASE("modifying an output saved by exp raises the version error on backward") {
  // PyTorch: y = x.exp(); y.add_(1); y.sum().backward() -> RuntimeError
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x.exp();
  y.add_(1.0);
  CHECK_EQ(y.version(), 1);
  CHECK_THROWS_WITH_AS(y.backward(ones({2})),
                       doctest::Contains("one of the variables needed for gradient computation "
                                         "has been modified by an inplace operation: [float32 "
                                         "[2]], which is output 0 of ExpBackward, is at version "
                                         "1; expected version 0 instead."),
                       AutogradError);
}

TEST_CASE("modifying a sigmoid output used by a later op raises on backward") {
  // PyTorch: y = x.sigmoid(); z = y * 2; y.mul_(3); z.backward() -> error from SigmoidBackward
  Tensor x = leaf({0.5});
  Tensor y = x.sigmoid();
  Tensor z = y * 2.0;
  y.mul_(3.0);
  CHECK_THROWS_WITH_AS(z.backward(), doctest::Contains("output 0 of SigmoidBackward"),
                       AutogradError);
}

TEST_CASE("modifying the output of a multiplication by a scalar is fine") {
  // PyTorch: y = x * 2; y.add_(1) -> fine (mul by a scalar saves nothing)
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  y.add_(1.0);
  CHECK_EQ(y.grad_fn_name(), "AddBackward");
  y.backward(ones({2}));
  check_values(x.grad(), {2}, {2, 2});
}

TEST_CASE("modifying an input saved by mul raises; a non-saved one does not") {
  Tensor a = leaf({1.0, 2.0});
  Tensor b = tensor({3.0, 4.0});  // does not require grad: mul saves b (for a's grad), not a
  Tensor h = a * 1.0;             // a non-leaf copy we may modify
  Tensor y = h * b;
  h.add_(1.0);  // h is not saved (b does not need a gradient)
  y.backward(ones({2}));
  check_values(a.grad(), {2}, {3, 4});
  Tensor y2 = (a * 1.0) * b;
  b.add_(1.0);  // b was saved for a's gradient
  // The fields: the node that saved b, b's versions then and now, and b's layout. b is a
  // leaf, so no node produced it.
  const auto e = caught<VersionCounterError>([&] { y2.backward(ones({2})); });
  REQUIRE(e);
  CHECK_EQ(e->op(), "MulBackward");
  CHECK_EQ(e->saved_version(), 0);
  CHECK_EQ(e->current_version(), 1);
  CHECK_EQ(e->shape(), Shape{2});
  CHECK_EQ(e->dtype(), kFloat32);
  CHECK(e->producer().empty());
  CHECK(std::string(e->what()).find("[float32 [2]] is at version 1; expected version 0") !=
        std::string::npos);
}

TEST_CASE("the version error names the grad_fn the modified tensor has when it is checked") {
  // PyTorch: h = a * 2; y = h.mm(w); h.add_(1); y.sum().backward() -> "[torch.FloatTensor
  // [2, 2]], which is output 0 of AddBackward0, is at version 1": mm saved h, add_ replaced
  // h's grad_fn, and the error names the replacement.
  Tensor a = leaf({1.0, 2.0, 3.0, 4.0}).view({2, 2});
  Tensor w = leaf({1.0, 0.0, 0.0, 1.0}).view({2, 2});
  Tensor h = a * 2.0;
  Tensor y = h.mm(w);
  h.add_(1.0);
  CHECK_EQ(h.grad_fn_name(), "AddBackward");
  const auto e = caught<VersionCounterError>([&] { y.sum().backward(); });
  REQUIRE(e);
  CHECK(std::string(e->what()).find("[float32 [2, 2]], which is output 0 of AddBackward, is at "
                                    "version 1; expected version 0") != std::string::npos);
  CHECK_EQ(e->op(), "MmBackward");
  CHECK_EQ(e->saved_version(), 0);
  CHECK_EQ(e->current_version(), 1);
  CHECK_EQ(e->shape(), Shape{2, 2});
  CHECK_EQ(e->producer(), "AddBackward");
  CHECK_EQ(e->producer_output(), 0);
}

TEST_CASE("in-place on a leaf that requires grad raises, and is allowed under no_grad") {
  Tensor x = leaf({1.0});
  CHECK_THROWS_WITH_AS(x.add_(1.0),
                       doctest::Contains("a leaf Variable that requires grad is being used in an "
                                         "in-place operation."),
                       AutogradError);
  CHECK_THROWS_WITH_AS(x.slice(0, 0, 1).mul_(2.0),
                       doctest::Contains("a view of a leaf Variable that requires grad"),
                       AutogradError);
  {
    NoGradGuard no_grad;
    x.add_(1.0);  // what optimizers do
  }
  check_values(x, {1}, {2});
}

TEST_CASE("backward twice raises; retain_graph keeps the saved tensors") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x.exp();
  y.backward(ones({2}), /*retain_graph=*/true);
  y.backward(ones({2}));  // works: the graph was retained
  check_values(x.grad(), {2}, {2 * std::exp(1.0), 2 * std::exp(2.0)}, 1e-5);
  CHECK_THROWS_WITH_AS(y.backward(ones({2})),
                       doctest::Contains("Trying to backward through the graph a second time"),
                       AutogradError);
}

TEST_CASE("an in-place op on a non-leaf is recorded and rebases its history") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 3.0;
  y.exp_();  // exp_ saves its result: d exp(3x)/dx = 3 exp(3x)
  CHECK_EQ(y.grad_fn_name(), "ExpBackward");
  y.backward(ones({2}));
  check_values(x.grad(), {2}, {3 * std::exp(3.0), 3 * std::exp(6.0)}, 1e-3);
}

TEST_CASE("an in-place mul on a non-leaf copies the old value when the other side needs it") {
  Tensor x = leaf({1.0, 2.0});
  Tensor w = leaf({5.0, 7.0});
  Tensor y = x * 1.0;
  y.mul_(w);  // d/dw = old y = x, d/dx = w
  y.backward(ones({2}));
  check_values(w.grad(), {2}, {1, 2});
  check_values(x.grad(), {2}, {5, 7});
}

TEST_CASE("an in-place op on a view updates the base's history (CopySlices)") {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0});
  Tensor y = x * 1.0;
  Tensor v = y.slice(0, 0, 2);
  v.mul_(10.0);
  CHECK_EQ(y.grad_fn_name(), "CopySlices");
  check_values(y, {4}, {10, 20, 3, 4});
  (y * y).backward(ones({4}));  // d(y^2)/dx = 2 y dy/dx, dy/dx = 10 on the slice, 1 elsewhere
  check_values(x.grad(), {4}, {2 * 10 * 10, 2 * 20 * 10, 2 * 3, 2 * 4});
}

TEST_CASE(
    "split, chunk and unbind make one node whose backward joins the pieces in one allocation") {
  // x (4, 6) float32 is split into three (4, 2) pieces; each piece's gradient is supplied.
  Tensor x = ones({4, 6}, TensorOptions().with_requires_grad());
  const std::vector<Tensor> pieces = x.split(2, 1);
  REQUIRE_EQ(pieces.size(), 3);
  for (const Tensor& p : pieces) CHECK_EQ(p.grad_fn_name(), "SplitBackward");
  CHECK_EQ(x.chunk(3, 1)[2].grad_fn_name(), "SplitBackward");
  CHECK_EQ(x.unbind(0)[3].grad_fn_name(), "UnbindBackward");
  std::vector<Tensor> grads;
  for (int i = 0; i < 3; ++i) grads.push_back(full({4, 2}, static_cast<double>(i + 1)));
  PolicyAllocator& alloc = allocator_for(kCPU);
  const int64_t before = alloc.stats().allocation.all().allocated;
  StatsDelta delta(alloc);
  autograd::backward(pieces, grads);
  // One allocation, x's gradient (cat of the three pieces' gradients): no zeros of x's shape per
  // piece, no accumulation.
  CHECK_EQ(alloc.stats().allocation.all().allocated - before, 1);
  CHECK_EQ(delta.allocated(), 512);  // 24 floats in one 512-byte block
  check_values(x.grad(), {4, 6},
               {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});

  // A piece without a gradient gets zeros of its own shape (a second allocation, freed), as in
  // PyTorch's split_backward.
  x.set_grad(Tensor());
  const std::vector<Tensor> again = x.split(std::vector<int64_t>{1, 5}, 1);
  const Tensor sevens = full({4, 5}, 7.0);
  const int64_t before_one = alloc.stats().allocation.all().allocated;
  StatsDelta one(alloc);
  autograd::backward({again[1]}, {sevens});
  CHECK_EQ(alloc.stats().allocation.all().allocated - before_one, 2);
  CHECK_EQ(one.allocated(), 512);
  check_values(x.grad(), {4, 6},
               {0, 7, 7, 7, 7, 7, 0, 7, 7, 7, 7, 7, 0, 7, 7, 7, 7, 7, 0, 7, 7, 7, 7, 7});

  // unbind: the rows' gradients stacked, zeros for the rows that got none.
  x.set_grad(Tensor());
  const std::vector<Tensor> rows = x.unbind(0);
  autograd::backward({rows[1], rows[3]}, {full({6}, 2.0), full({6}, 5.0)});
  check_values(x.grad(), {4, 6},
               {0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5});
}

TEST_CASE("an in-place op on a piece of split, chunk or unbind raises while autograd records") {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0});
  Tensor y = x * 1.0;
  const char* rule = "This view is the output of a function that returns multiple views";
  CHECK_THROWS_WITH_AS(y.split(2)[1].add_(1.0), doctest::Contains(rule), AutogradError);
  CHECK_THROWS_WITH_AS(y.split(2)[1].add_(1.0),
                       doctest::Contains("Output 1 of SplitBackward is a view"), AutogradError);
  CHECK_THROWS_WITH_AS(y.chunk(2)[0].view({2, 1}).mul_(2.0),
                       doctest::Contains("Output 0 of ViewBackward is a view"), AutogradError);
  CHECK_THROWS_WITH_AS(y.unbind()[3].zero_(), doctest::Contains(rule), AutogradError);
  // A piece of a tensor that does not require grad, written with one that does.
  Tensor plain = zeros({4});
  CHECK_THROWS_WITH_AS(plain.split(2)[0].copy_(x.slice(0, 0, 2) * 2.0), doctest::Contains(rule),
                       AutogradError);
  CHECK_EQ(y.version(), 0);  // nothing was written
  check_values(y, {4}, {1, 2, 3, 4});
  // Allowed, as in PyTorch: under no_grad, when nothing requires grad, and on a detached piece.
  {
    NoGradGuard no_grad;
    y.split(2)[1].add_(1.0);
  }
  plain.split(2)[1].add_(1.0);
  y.split(2)[0].detach().mul_(10.0);
  check_values(y, {4}, {10, 20, 4, 5});
  check_values(plain, {4}, {0, 0, 1, 1});
}

TEST_CASE("an in-place op writing a tensor that requires grad into a view of a plain tensor") {
  Tensor w = leaf({2.0, 3.0});
  Tensor buffer = zeros({4});
  buffer.slice(0, 1, 3).copy_(w * 2.0);
  CHECK(buffer.requires_grad());
  (buffer * tensor({1.0, 10.0, 100.0, 1000.0})).backward(ones({4}));
  check_values(w.grad(), {2}, {20, 200});
}

TEST_CASE("under no_grad nothing is recorded") {
  Tensor x = leaf({1.0});
  NoGradGuard no_grad;
  CHECK_FALSE(is_grad_enabled());
  Tensor y = x * 2.0;
  CHECK_FALSE(y.requires_grad());
  {
    EnableGradGuard enable;
    CHECK((x * 2.0).requires_grad());
  }
  CHECK_FALSE(is_grad_enabled());
}

TEST_CASE("detach shares storage and version counter but has no history") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  CHECK(d.shares_storage_with(y));
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  d.add_(1.0);  // visible through y, and bumps the shared version counter
  CHECK_EQ(y.version(), 1);
  check_values(y, {2}, {3, 5});
  Tensor z = x * 3.0;
  z.detach_();
  CHECK_FALSE(z.requires_grad());
  CHECK_THROWS_WITH_AS(z.slice(0, 0, 1).detach_(), doctest::Contains("Can't detach views in-place"),
                       AutogradError);
}

TEST_CASE("requires_grad_ rules follow PyTorch") {
  Tensor i = tensor({1, 2});
  CHECK_THROWS_WITH_AS(i.requires_grad_(),
                       doctest::Contains("only Tensors of floating point dtype"), AutogradError);
  Tensor x = leaf({1.0});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH_AS(
      y.requires_grad_(false),
      doctest::Contains("you can only change requires_grad flags of leaf variables"),
      AutogradError);
  CHECK_THROWS_WITH_AS(tensor({1.0, 2.0}).backward(ones({2})),
                       doctest::Contains("does not require grad and does not have a grad_fn"),
                       AutogradError);
  CHECK_THROWS_WITH_AS((x * tensor({1.0, 2.0})).backward(),
                       doctest::Contains("grad can be implicitly created only for scalar outputs"),
                       AutogradError);
}

TEST_CASE("a tensor hook can replace the gradient; retain_grad keeps a non-leaf's gradient") {
  Tensor x = leaf({1.0, 2.0});
  autograd::register_hook(x, [](const Tensor& g) { return g * 10.0; });
  Tensor y = x * 2.0;
  y.retain_grad();
  Tensor z = y * 3.0;
  z.backward(ones({2}));
  check_values(y.grad(), {2}, {3, 3});
  check_values(x.grad(), {2}, {60, 60});
}

TEST_CASE("Tensor::register_hook reaches autograd through the engine's seam") {
  Tensor x = leaf({1.0, 2.0});
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  Tensor y = x * 2.0;
  y.register_hook([](const Tensor& g) { return g + 1.0; });  // a non-leaf: on its node
  (y * 3.0).backward(ones({2}));
  // dy = 3, replaced by 3 + 1; dx = 2 dy = 8, replaced by 80.
  check_values(x.grad(), {2}, {80, 80});
  CHECK_THROWS_AS(tensor({1.0}).register_hook([](const Tensor& g) { return g; }), AutogradError);
}

TEST_CASE("a post-accumulate hook sees the leaf with its accumulated gradient and may free it") {
  Tensor x = leaf({1.0, 2.0});
  std::vector<std::vector<double>> seen;
  x.register_post_accumulate_grad_hook(
      [&seen](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<double>()); });
  (x * 3.0).sum().backward();
  (x * 3.0).sum().backward();  // accumulates: the hook sees 3 + 3
  REQUIRE_EQ(seen.size(), 2u);
  CHECK_EQ(seen[0], std::vector<double>{3, 3});
  CHECK_EQ(seen[1], std::vector<double>{6, 6});

  // The arriving gradient is released before the hook runs: a hook that takes .grad away
  // leaves no gradient bytes allocated.
  Tensor w = ones({256}, TensorOptions().with_requires_grad());
  w.register_post_accumulate_grad_hook([](const Tensor& leaf) { leaf.set_grad(Tensor()); });
  const Tensor loss = (w * 2.0).sum();
  const size_t before = memory_allocated();
  loss.backward();
  CHECK_FALSE(w.grad().defined());
  CHECK_EQ(memory_allocated(), before);

  Tensor y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("non-leaf"), AutogradError);
  CHECK_THROWS_AS(tensor({1.0}).register_post_accumulate_grad_hook([](const Tensor&) {}),
                  AutogradError);
}

TEST_CASE("a leaf's gradient is accumulated as soon as it is ready, in every step of a loop") {
  // A training loop keeps the last step's loss, and with it the leaves' AccumulateGrad nodes,
  // into the next forward, which reuses them: their creation order is then older than every op
  // node's. Backward must still hand w2's gradient over before it goes on to the first layer
  // (what lets DDP's first bucket travel while backward computes the rest).
  const Tensor x = ones({2, 3});
  Tensor w1 = ones({3, 3}, TensorOptions().with_requires_grad());
  Tensor w2 = ones({3, 1}, TensorOptions().with_requires_grad());
  std::vector<std::string> order;
  w2.register_post_accumulate_grad_hook([&order](const Tensor&) { order.push_back("w2"); });
  w1.register_post_accumulate_grad_hook([&order](const Tensor&) { order.push_back("w1"); });
  Tensor loss;  // the last step's, alive into the next forward
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    order.clear();
    const Tensor h = matmul(x, w1);
    h.register_hook([&order](const Tensor&) {
      order.push_back("h");  // h's gradient: the first layer's backward is about to run
      return Tensor();
    });
    loss = matmul(relu(h), w2).sum();
    loss.backward();
    CHECK_EQ(order, std::vector<std::string>{"w2", "h", "w1"});
  }
}

TEST_CASE("out= with an output that requires grad raises") {
  Tensor x = leaf({1.0, 2.0});
  Tensor a = ones({2});
  CHECK_THROWS_WITH_AS(add_out(x, a, a),
                       doctest::Contains("functions with out=... arguments don't support "
                                         "automatic differentiation"),
                       AutogradError);
}

TEST_CASE("autograd::grad returns gradients without touching .grad") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * x;
  const std::vector<Tensor> g = autograd::grad({y}, {x}, {ones({2})});
  check_values(g[0], {2}, {2, 4});
  CHECK_FALSE(x.grad().defined());
}

// ---- memory ----

TEST_CASE("backward frees the saved activations as each node runs") {
  Tensor x = ones({1024}, TensorOptions().with_requires_grad());
  const Tensor seed = ones({1024});
  PolicyAllocator& alloc = allocator_for(kCPU);
  StatsDelta delta(alloc);
  // exp saves its output (4 KiB); the scalar multiply saves nothing.
  Tensor z = exp(x) * 3.0;
  CHECK_EQ(delta.allocated(), 2 * 4096);  // z and the saved exp(x)
  z.backward(seed);
  // The saved exp(x) is gone; x.grad (4 KiB) appeared.
  CHECK_EQ(delta.allocated(), 2 * 4096);
  CHECK(x.grad().defined());
  x.set_grad(Tensor());
  CHECK_EQ(delta.allocated(), 4096);  // only z is left
}

TEST_CASE("under no_grad a forward holds only its outputs") {
  Tensor x = ones({1024}, TensorOptions().with_requires_grad());
  StatsDelta delta(allocator_for(kCPU));
  Tensor with_grad = exp(x) * 3.0;
  const int64_t recorded = delta.allocated();
  with_grad = Tensor();
  {
    NoGradGuard no_grad;
    Tensor z = exp(x) * 3.0;
    CHECK_EQ(delta.allocated(), 4096);  // just z: exp(x) was freed as soon as the mul ran
  }
  CHECK_EQ(recorded, 2 * 4096);  // the difference is exactly the saved activation
}

TEST_CASE("a detached output holds no graph") {
  Tensor x = ones({1024}, TensorOptions().with_requires_grad());
  StatsDelta delta(allocator_for(kCPU));
  Tensor d = (exp(x) * 3.0).detach();  // the graph (and the saved exp(x)) died with the output
  CHECK_EQ(delta.allocated(), 4096);
  CHECK_FALSE(d.requires_grad());
}

TEST_CASE("save_on_host moves saved activations off the device") {
  const Device dev("sim:0");
  Tensor x = ones({1024}, TensorOptions().with_device(dev).with_requires_grad());
  StatsDelta on_device(allocator_for(dev));
  StatsDelta on_host(allocator_for(kCPU));
  Tensor z;
  {
    autograd::SaveOnHostGuard guard;
    z = exp(x) * 3.0;
  }
  CHECK_EQ(on_device.allocated(), 4096);  // only z stays on sim:0
  CHECK_EQ(on_host.allocated(), 4096);    // the saved exp(x) lives on the host
  z.backward(ones({1024}, dev));
  CHECK_EQ(on_host.allocated(), 0);  // released after its node ran
  check_values(x.grad().cpu().slice(0, 0, 2), {2}, {3 * std::exp(1.0), 3 * std::exp(1.0)}, 1e-4);
}

TEST_CASE("saved-tensor hooks: pack runs once per saved tensor, unpack at each use") {
  Tensor x = leaf({1, 2, 3});
  int packs = 0, unpacks = 0;
  Tensor y;
  {
    autograd::SavedTensorHooksGuard guard(
        [&](const Tensor& t) -> std::any {
          ++packs;
          return t.detach().clone();
        },
        [&](const std::any& packed) {
          ++unpacks;
          return std::any_cast<Tensor>(packed);
        });
    y = (x * x).sum();  // mul saves both operands
  }
  CHECK_EQ(packs, 2);
  CHECK_EQ(unpacks, 0);
  y.backward();
  CHECK_EQ(unpacks, 2);
  check_values(x.grad(), {3}, {2, 4, 6});
  // Both hooks are needed.
  const auto error = caught<AutogradError>([] {
    autograd::SavedTensorHooksGuard guard([](const Tensor& t) -> std::any { return t; }, {});
  });
  REQUIRE(error);
  CHECK(std::string(error->what()).find("got pack set and unpack empty") != std::string::npos);
}

TEST_CASE("the gradient of a slice with a step too large for int64 arithmetic") {
  // slice's backward writes into x[start:end:step]; start + len x step would overflow.
  Tensor x = ones({5}, TensorOptions().with_requires_grad());
  (x.slice(0, 3, 5, std::numeric_limits<int64_t>::max()) * 2.0).sum().backward();
  check_values(x.grad(), {5}, {0, 0, 0, 2, 0});
}

}  // TEST_SUITE("autograd")
