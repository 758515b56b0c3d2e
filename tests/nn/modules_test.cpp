// Modules as PyTorch's nn.Module behaves: dotted parameter names, counts and bytes, train/eval,
// to(device/dtype) in place, zero_grad, strict state dicts, printing, LazyLinear's deferred
// allocation, and the forward values of the layers (Embedding, LayerNorm, Dropout, attention).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/nn/attention.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;

namespace {

const Device kSim("sim:0");

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// The 784-512-512-10 classifier of train_mlp, as a Sequential.
std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(784, 512), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(512, 512), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(512, 10)});
}

std::shared_ptr<nn::Sequential> make_small(int64_t in = 4) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(in, 3), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(3, 2)});
}

// A two-block GPT: token embedding, blocks, final norm, head without bias.
class TinyGpt : public nn::UnaryModule {
 public:
  TinyGpt() {
    wte_ = register_module("wte", std::make_shared<nn::Embedding>(11, 8));
    blocks_ = register_module("blocks", std::make_shared<nn::Sequential>());
    blocks_->push_back(std::make_shared<nn::TransformerBlock>(8, 2, 6));
    blocks_->push_back(std::make_shared<nn::TransformerBlock>(8, 2, 6));
    ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{8}));
    head_ = register_module("head", std::make_shared<nn::Linear>(8, 11, nn::LinearOptions{false}));
  }
  Tensor forward(const Tensor& idx) override {
    return head_->forward(ln_f_->forward(blocks_->forward(wte_->forward(idx))));
  }
  std::string name() const override { return "TinyGpt"; }

 private:
  std::shared_ptr<nn::Embedding> wte_;
  std::shared_ptr<nn::Sequential> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  std::shared_ptr<nn::Linear> head_;
};

// Sum of rounded parameter bytes, computed from the shapes.
int64_t expected_param_bytes(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += rounded(p.nbytes());
  return n;
}

}  // namespace

TEST_SUITE("nn") {
TEST_CASE("parameters get dotted recursive names as in PyTorch") {
  auto seq = make_small();
  CHECK_EQ(names_of(seq->named_parameters()),
           std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(seq->named_parameters(/*recurse=*/false).empty());
  CHECK_EQ(seq->named_children().size(), 3);

  TinyGpt gpt;
  std::vector<std::string> expected{"wte.weight"};
  for (const char* b : {"blocks.0.", "blocks.1."}) {
    for (const char* p : {"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias",
                          "attn.proj.weight", "attn.proj.bias", "ln2.weight", "ln2.bias",
                          "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"}) {
      expected.push_back(std::string(b) + p);
    }
  }
  expected.push_back("ln_f.weight");
  expected.push_back("ln_f.bias");
  expected.push_back("head.weight");
  CHECK_EQ(names_of(gpt.named_parameters()), expected);
  CHECK_EQ(names_of(gpt.named_buffers()),
           std::vector<std::string>{"blocks.0.attn.future", "blocks.1.attn.future"});
  for (const auto& [name, p] : gpt.named_parameters()) {
    CAPTURE(name);
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  // wte 11*8; per block: 2 norms (2*8 each), qkv 8*24+24, proj 8*8+8, mlp 8*32+32 and 32*8+8;
  // ln_f 2*8; head 8*11.
  const int64_t block = 2 * 16 + (8 * 24 + 24) + (8 * 8 + 8) + (8 * 32 + 32) + (32 * 8 + 8);
  CHECK_EQ(gpt.num_parameters(), 88 + 2 * block + 16 + 88);
}

TEST_CASE("Linear and the 784-512-512-10 MLP have PyTorch's parameter counts and bytes") {
  StatsDelta d(allocator_for(kCPU));
  nn::Linear fc(784, 512);
  CHECK_EQ(fc.num_parameters(), 401920);
  CHECK_EQ(fc.weight().sizes(), Shape{512, 784});
  CHECK_EQ(fc.bias().sizes(), Shape{512});
  CHECK_EQ(fc.weight().dtype(), kFloat32);
  const int64_t fc_bytes = rounded(512 * 784 * 4) + rounded(512 * 4);
  CHECK_EQ(static_cast<int64_t>(fc.parameter_nbytes()), fc_bytes);
  CHECK_EQ(d.allocated(), fc_bytes);  // construction allocates the parameters and nothing else

  StatsDelta d2(allocator_for(kCPU));
  auto mlp = make_mlp();
  CHECK_EQ(mlp->num_parameters(), 669706);
  const int64_t mlp_bytes = rounded(784 * 512 * 4) + rounded(512 * 4) + rounded(512 * 512 * 4) +
                            rounded(512 * 4) + rounded(512 * 10 * 4) + rounded(10 * 4);
  CHECK_EQ(static_cast<int64_t>(mlp->parameter_nbytes()), mlp_bytes);
  CHECK_EQ(d2.allocated(), mlp_bytes);
  CHECK_EQ(mlp->forward(zeros({3, 784})).sizes(), Shape{3, 10});
  nn::Linear no_bias(5, 7, {.bias = false});
  CHECK_EQ(no_bias.num_parameters(), 35);
  CHECK_FALSE(no_bias.bias().defined());
  CHECK_THROWS_WITH_AS(nn::Linear(-1, 3), doctest::Contains("[Linear]"), ShapeError);
}

TEST_CASE("Linear's initialisation is bounded like PyTorch's and spreads over the range") {
  manual_seed(7);
  nn::Linear fc(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  for (const Tensor& t : {fc.weight(), fc.bias()}) {
    const std::vector<float> v = t.to_vector<float>();
    float lo = 1, hi = -1;
    for (float x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    if (v.size() > 1000) {  // 5000 uniform draws reach close to both ends
      CHECK(lo < -0.9 * bound);
      CHECK(hi > 0.9 * bound);
    }
  }
  // The same seed gives the same weights.
  manual_seed(7);
  nn::Linear again(100, 50);
  CHECK(equal(again.weight(), fc.weight()));
  CHECK(equal(again.bias(), fc.bias()));
  // Embedding: N(0, 1); LayerNorm: ones and zeros.
  nn::Embedding emb(100, 100);
  const double mean = emb.weight().mean().item<double>();
  const double sd = emb.weight().std().item<double>();
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::abs(sd - 1.0) < 0.05);
  nn::LayerNorm ln(Shape{3});
  check_values(ln.named_parameters()[0].second, {3}, {1, 1, 1});
  check_values(ln.named_parameters()[1].second, {3}, {0, 0, 0});
}

TEST_CASE("train and eval propagate to every descendant") {
  TinyGpt gpt;
  CHECK(gpt.is_training());
  gpt.eval();
  std::vector<const nn::Module*> stack{&gpt};
  int visited = 0;
  while (!stack.empty()) {
    const nn::Module* m = stack.back();
    stack.pop_back();
    ++visited;
    CHECK_FALSE(m->is_training());
    for (const auto& [name, child] : m->named_children()) stack.push_back(child.get());
  }
  CHECK(visited > 10);
  gpt.train();
  for (const auto& [name, child] : gpt.named_children()) CHECK(child->is_training());
}

TEST_CASE("to(sim:0) keeps the parameter handles and moves exactly the parameter bytes") {
  auto seq = make_small(300);
  const std::vector<Tensor> before = seq->parameters();
  const std::vector<Tensor> values_before = [&] {
    std::vector<Tensor> v;
    for (const Tensor& p : before) v.push_back(p.detach().clone());
    return v;
  }();
  const int64_t bytes = expected_param_bytes(*seq);
  StatsDelta cpu(allocator_for(kCPU));
  StatsDelta sim(allocator_for(kSim));
  seq->to(kSim);
  CHECK_EQ(cpu.allocated(), -bytes);
  CHECK_EQ(sim.allocated(), bytes);
  const std::vector<Tensor> after = seq->parameters();
  REQUIRE_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    CAPTURE(i);
    CHECK(after[i].is_same(before[i]));
    CHECK_EQ(before[i].device(), kSim);
    CHECK(before[i].requires_grad());
    CHECK(before[i].is_leaf());
    CHECK(equal(before[i].cpu(), values_before[i]));
  }
  // A forward on sim:0 works and back to the CPU restores the bytes.
  CHECK_EQ(seq->forward(ones({2, 300}, kSim)).device(), kSim);
  seq->to(kCPU);
  CHECK_EQ(cpu.allocated(), 0);
  CHECK_EQ(sim.allocated(), 0);
}

TEST_CASE("to() moves existing gradients along with their parameters") {
  // PyTorch's Module._apply converts param.grad too, so an optimizer step after to() works.
  auto seq = make_small();
  seq->forward(ones({2, 4})).sum().backward();
  for (const Tensor& p : seq->parameters()) REQUIRE(p.grad().defined());
  seq->to(kSim);
  for (const Tensor& p : seq->parameters()) CHECK_EQ(p.grad().device(), kSim);
  seq->to(kFloat64);
  for (const Tensor& p : seq->parameters()) CHECK_EQ(p.grad().dtype(), kFloat64);
  seq->to(kCPU);
  for (const Tensor& p : seq->parameters()) CHECK_EQ(p.grad().device(), kCPU);
}

TEST_CASE("to(float64) converts parameters in place and leaves bool buffers alone") {
  nn::CausalSelfAttention attn(8, 2, 4);
  const std::vector<Tensor> before = attn.parameters();
  const int64_t old_bytes = expected_param_bytes(attn);
  StatsDelta d(allocator_for(kCPU));
  attn.to(kFloat64);
  int64_t new_bytes = 0;
  for (const Tensor& p : before) {
    CHECK_EQ(p.dtype(), kFloat64);
    CHECK(p.requires_grad());
    new_bytes += rounded(p.nbytes());
  }
  CHECK_EQ(static_cast<int64_t>(attn.parameter_nbytes()), new_bytes);
  CHECK_EQ(d.allocated(), new_bytes - old_bytes);
  CHECK_EQ(attn.named_buffers()[0].second.dtype(), kBool);
  for (size_t i = 0; i < before.size(); ++i) CHECK(attn.parameters()[i].is_same(before[i]));
}

TEST_CASE("zero_grad frees exactly the gradient bytes, or keeps them zeroed") {
  auto seq = make_small(300);
  const int64_t bytes = expected_param_bytes(*seq);
  {
    StatsDelta d(allocator_for(kCPU));
    seq->forward(ones({2, 300})).sum().backward();
    CHECK_EQ(d.allocated(), bytes);  // one gradient per parameter, nothing else survives
  }
  StatsDelta d(allocator_for(kCPU));
  std::vector<Tensor> grads;
  for (const Tensor& p : seq->parameters()) grads.push_back(p.grad());
  seq->zero_grad(/*set_to_none=*/false);
  CHECK_EQ(d.allocated(), 0);
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor g = seq->parameters()[i].grad();
    CHECK(g.is_same(grads[i]));
    CHECK_EQ(g.abs().sum().item<double>(), 0.0);
  }
  grads.clear();
  seq->zero_grad();  // set_to_none = true, PyTorch's default
  CHECK_EQ(d.allocated(), -bytes);
  for (const Tensor& p : seq->parameters()) CHECK_FALSE(p.grad().defined());
  seq->zero_grad();  // nothing to free: no-op
  CHECK_EQ(d.allocated(), -bytes);
}

TEST_CASE("state_dict aliases the parameters and buffers; load_state_dict copies in place") {
  TinyGpt a, b;
  const nn::StateDict sa = a.state_dict();
  CHECK_EQ(sa.size(), a.named_parameters().size() + a.named_buffers().size());
  CHECK(sa[0].second.is_same(a.named_parameters()[0].second));
  CHECK_EQ(sa.back().first, "blocks.1.attn.future");
  const std::vector<Tensor> handles = b.parameters();
  StatsDelta d(allocator_for(kCPU));
  b.load_state_dict(sa);
  CHECK_EQ(d.allocated(), 0);
  const nn::StateDict sb = b.state_dict();
  for (size_t i = 0; i < sb.size(); ++i) {
    CAPTURE(sb[i].first);
    CHECK(equal(sb[i].second, sa[i].second));
    CHECK_FALSE(sb[i].second.shares_storage_with(sa[i].second));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    CHECK(handles[i].is_same(b.parameters()[i]));
    CHECK(handles[i].requires_grad());
    CHECK(handles[i].is_leaf());
  }
  const Tensor idx = tensor({1, 2, 3, 4});
  a.eval();
  b.eval();
  CHECK(equal(a.forward(idx.unsqueeze(0)), b.forward(idx.unsqueeze(0))));
}

TEST_CASE("strict load_state_dict names missing and unexpected keys and shape mismatches") {
  auto model = make_small();
  nn::Linear only_first(4, 3);
  nn::StateDict partial{{"0.weight", only_first.weight()}, {"0.bias", only_first.bias()}};
  CHECK_THROWS_WITH_AS(model->load_state_dict(partial),
                       doctest::Contains("Missing key(s): \"2.weight\", \"2.bias\"."),
                       CheckpointError);
  nn::StateDict extra = model->state_dict();
  extra.emplace_back("3.weight", zeros({2}));
  CHECK_THROWS_WITH_AS(model->load_state_dict(extra),
                       doctest::Contains("Unexpected key(s): \"3.weight\"."), CheckpointError);
  auto wider = make_small(5);
  CHECK_THROWS_WITH_AS(model->load_state_dict(wider->state_dict()),
                       doctest::Contains("size mismatch for 0.weight: copying a param with shape "
                                         "[3, 5], the shape in the current model is [3, 4]"),
                       CheckpointError);
  CHECK_THROWS_WITH_AS(model->load_state_dict(wider->state_dict()),
                       doctest::Contains("[load_state_dict] error(s) in loading state_dict for "
                                         "Sequential"),
                       CheckpointError);
  // Non-strict: missing and unexpected keys are fine, present keys are copied.
  model->load_state_dict(partial, /*strict=*/false);
  CHECK(equal(model->named_parameters()[0].second, only_first.weight()));
  model->load_state_dict(extra, /*strict=*/false);
  // ... but a shape mismatch is an error even then (as in PyTorch).
  CHECK_THROWS_AS(model->load_state_dict(wider->state_dict(), false), CheckpointError);
}

TEST_CASE("calling a module runs its forward hooks around forward; forward() alone skips them") {
  auto relu = std::make_shared<nn::ReLU>();
  nn::Sequential seq({std::make_shared<nn::Tanh>(), relu});
  std::vector<std::string> events;
  const uint64_t pre = relu->register_forward_pre_hook([&](nn::UnaryModule& m, const Tensor& in) {
    events.push_back(fmt::format("pre {} {}", m.name(), in.numel()));
  });
  relu->register_forward_hook([&](nn::UnaryModule&, const Tensor& in, const Tensor& out) {
    events.push_back(fmt::format("post {}", out.sizes() == in.sizes() ? "same" : "other"));
  });
  (void)seq.forward(ones({2, 3}));  // Sequential calls its children: the hooks run
  CHECK_EQ(events, std::vector<std::string>{"pre ReLU 6", "post same"});
  (void)relu->forward(ones({2}));  // forward() itself: no hooks, as in PyTorch
  CHECK_EQ(events.size(), 2u);
  relu->remove_forward_hook(pre);
  (void)(*relu)(ones({2}));
  CHECK_EQ(events, std::vector<std::string>{"pre ReLU 6", "post same", "post same"});
}

TEST_CASE("str prints the module tree with indentation") {
  auto seq =
      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
          std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Dropout>(0.25),
          std::make_shared<nn::Linear>(3, 2, nn::LinearOptions{false})});
  CHECK_EQ(seq->str(),
           "Sequential(\n"
           "  (0): Linear(in_features=4, out_features=3, bias=true)\n"
           "  (1): ReLU()\n"
           "  (2): Dropout(p=0.25)\n"
           "  (3): Linear(in_features=3, out_features=2, bias=false)\n"
           ")");
  nn::Sequential outer;
  outer.push_back(seq);
  CHECK_EQ(outer.str(),
           "Sequential(\n"
           "  (0): Sequential(\n"
           "    (0): Linear(in_features=4, out_features=3, bias=true)\n"
           "    (1): ReLU()\n"
           "    (2): Dropout(p=0.25)\n"
           "    (3): Linear(in_features=3, out_features=2, bias=false)\n"
           "  )\n"
           ")");
  CHECK_EQ(nn::Embedding(10, 3).str(), "Embedding(10, 3)");
}

TEST_CASE("LazyLinear allocates nothing until its first forward, then exactly its parameters") {
  StatsDelta d(allocator_for(kCPU));
  nn::LazyLinear lazy(300);
  CHECK_FALSE(lazy.initialized());
  CHECK_EQ(lazy.parameter_nbytes(), 0);
  CHECK(lazy.parameters().empty());
  CHECK_EQ(d.allocated(), 0);
  CHECK_EQ(lazy.str(), "LazyLinear(in_features=<uninitialised>, out_features=300)");
  const Tensor x = ones({2, 70});
  StatsDelta d2(allocator_for(kCPU));
  const Tensor y = lazy.forward(x);
  const int64_t params = rounded(300 * 70 * 4) + rounded(300 * 4);
  CHECK_EQ(static_cast<int64_t>(lazy.parameter_nbytes()), params);
  CHECK_EQ(d2.allocated(), params + rounded(2 * 300 * 4));  // parameters + the output
  CHECK_EQ(y.sizes(), Shape{2, 300});
  CHECK(lazy.initialized());
  CHECK_EQ(lazy.num_parameters(), 300 * 70 + 300);
  CHECK_EQ(names_of(lazy.named_parameters()), std::vector<std::string>{"weight", "bias"});
  const double bound = 1.0 / std::sqrt(70.0);
  CHECK(lazy.parameters()[0].abs().max().item<double>() <= bound);
  CHECK_EQ(lazy.str(), "LazyLinear(in_features=70, out_features=300)");
  CHECK_THROWS_WITH_AS(lazy.forward(ones({2, 71})),
                       doctest::Contains("initialised for in_features=70 but got input of shape "
                                         "[2, 71]"),
                       ShapeError);
  CHECK_EQ(static_cast<int64_t>(lazy.parameter_nbytes()), params);  // unchanged by the error
  CHECK_EQ(lazy.forward(ones({5, 70})).sizes(), Shape{5, 300});
}

TEST_CASE("Embedding looks up rows for indices of any shape") {
  nn::Embedding emb(5, 3);
  const Tensor w = emb.weight();
  const Tensor idx = tensor({{4, 0}, {2, 4}}).to(kInt64);
  const Tensor y = emb.forward(idx);
  CHECK_EQ(y.sizes(), Shape{2, 2, 3});
  const std::vector<int64_t> flat{4, 0, 2, 4};
  for (size_t i = 0; i < flat.size(); ++i) {
    CAPTURE(i);
    CHECK(equal(y.view({4, 3})[static_cast<int64_t>(i)], w[flat[i]].detach()));
  }
  CHECK_THROWS_AS(emb.forward(tensor({5})), IndexError);
  // The gradient of the table scatters back to the rows used (row 4 twice).
  y.sum().backward();
  check_values(w.grad().sum({1}), {5}, {3, 0, 3, 0, 6});
}

TEST_CASE("LayerNorm normalises the last dimension with its scale and shift") {
  nn::LayerNorm ln(Shape{4});
  // mean 2.5, biased variance 1.25: (x - 2.5) / sqrt(1.25 + 1e-5)
  const double s = 1.0 / std::sqrt(1.25 + 1e-5);
  check_values(ln.forward(tensor({{1.0, 2.0, 3.0, 4.0}, {2.0, 2.0, 2.0, 2.0}})), {2, 4},
               {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s, 0, 0, 0, 0}, 1e-5);
  {
    NoGradGuard no_grad;
    ln.named_parameters()[0].second.fill_(2.0);
    ln.named_parameters()[1].second.fill_(1.0);
  }
  check_values(ln.forward(tensor({{1.0, 2.0, 3.0, 4.0}})), {1, 4},
               {1 - 3 * s, 1 - s, 1 + s, 1 + 3 * s}, 1e-5);
  CHECK_THROWS_WITH_AS(ln.forward(ones({2, 3})), doctest::Contains("[layer_norm]"), ShapeError);
  nn::LayerNorm plain(Shape{2}, 1e-5, /*elementwise_affine=*/false);
  CHECK(plain.parameters().empty());
}

TEST_CASE("Dropout returns its input itself in eval mode or with p = 0") {
  const Tensor x = ones({10});
  nn::Dropout drop(0.5);
  drop.eval();
  CHECK(drop.forward(x).is_same(x));
  nn::Dropout none(0.0);
  CHECK(none.is_training());
  CHECK(none.forward(x).is_same(x));
  CHECK(nn::dropout(x, 0.7, /*training=*/false).is_same(x));
  check_value_error([] { nn::Dropout(1.5); }, "Dropout", "p", "1.5");
  CHECK_THROWS_AS(nn::dropout(x, -0.1, true), ValueError);
  check_values(nn::dropout(x, 1.0, true), {10}, std::vector<double>(10, 0.0));
}

TEST_CASE("Dropout zeroes a fraction p and scales the survivors by 1/(1-p)") {
  constexpr int64_t kN = 100000;
  const double p = 0.3;
  Generator g(1234);
  const Tensor x = ones({kN});
  const Tensor y = nn::dropout(x, p, true, &g);
  const std::vector<float> v = y.to_vector<float>();
  const float scaled = static_cast<float>(1.0 / (1.0 - p));
  int64_t zeros_seen = 0, others = 0;
  for (float f : v) {
    if (f == 0.0f) {
      ++zeros_seen;
    } else if (f != scaled) {
      ++others;
    }
  }
  CHECK_EQ(others, 0);
  // Binomial(1e5, 0.3): standard deviation 0.0014 of the fraction; 0.01 is 7 of them.
  CHECK(std::abs(static_cast<double>(zeros_seen) / kN - p) < 0.01);
  // The same generator state gives the same mask; the next draw another one.
  Generator g2(1234);
  CHECK(equal(nn::dropout(x, p, true, &g2), y));
  CHECK_FALSE(equal(nn::dropout(x, p, true, &g2), y));
  const GeneratorState s = default_generator(kCPU).get_state();
  const Tensor a = nn::dropout(x, p, true);
  default_generator(kCPU).set_state(s);
  CHECK(equal(nn::dropout(x, p, true), a));
}

TEST_CASE("Dropout keeps its bool mask only when the input requires grad") {
  constexpr int64_t kN = 100000;
  const Tensor x = ones({kN});
  StatsDelta d(allocator_for(kCPU));
  Tensor y = nn::dropout(x, 0.5, true);
  CHECK_EQ(d.allocated(), rounded(kN * 4));  // the output; the mask was freed
  y = Tensor();
  Tensor leaf = ones({kN});
  leaf.requires_grad_();
  StatsDelta d2(allocator_for(kCPU));
  Tensor z = nn::dropout(leaf, 0.5, true);
  CHECK_EQ(d2.allocated(), rounded(kN * 4) + rounded(kN));  // output + saved mask (1 byte each)
  CHECK_EQ(z.grad_fn_name(), "DropoutBackward");
  z.backward(ones({kN}));
  // d/dx = mask / (1 - p): exactly where y is non-zero, 2.
  CHECK(equal(leaf.grad(), z.detach()));
}

TEST_CASE("CausalSelfAttention keeps the shape and never looks at future tokens") {
  manual_seed(3);
  nn::CausalSelfAttention attn(16, 4, 8);
  attn.eval();
  NoGradGuard no_grad;
  const Tensor x = randn({2, 6, 16});
  const Tensor y = attn.forward(x);
  CHECK_EQ(y.sizes(), Shape{2, 6, 16});
  Tensor x2 = x.clone();
  x2.select(1, 4).add_(1.0);  // change token 4 of both sequences
  const Tensor y2 = attn.forward(x2);
  CHECK(allclose(y.slice(1, 0, 4), y2.slice(1, 0, 4), 0.0, 1e-6));  // positions 0..3: unchanged
  CHECK_FALSE(allclose(y.slice(1, 4, 6), y2.slice(1, 4, 6), 1e-3, 1e-3));
  CHECK_THROWS_WITH_AS(attn.forward(zeros({1, 9, 16})), doctest::Contains("T <= 8"), ShapeError);
  CHECK_THROWS_AS(attn.forward(zeros({1, 4, 15})), ShapeError);
  check_value_error([] { nn::CausalSelfAttention(10, 3, 4); }, "CausalSelfAttention", "embed_dim",
                    "10");
  CHECK_EQ(attn.num_parameters(), 16 * 48 + 48 + 16 * 16 + 16);
}

TEST_CASE("TransformerBlock keeps the shape and gives every parameter a gradient") {
  manual_seed(5);
  nn::TransformerBlock block(16, 2, 8, /*dropout=*/0.1);
  const Tensor x = randn({3, 5, 16});
  const Tensor y = block.forward(x);
  CHECK_EQ(y.sizes(), Shape{3, 5, 16});
  y.square().mean().backward();
  for (const auto& [name, p] : block.named_parameters()) {
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    CHECK_EQ(p.grad().sizes(), p.sizes());
  }
  // eval: deterministic.
  block.eval();
  NoGradGuard no_grad;
  CHECK(equal(block.forward(x), block.forward(x)));
}

}  // TEST_SUITE("nn")
