// The CharLM module: construction and the labelled forward.
#include "examples/charlm/charlm_model.h"

#include <fmt/format.h>

#include "allocator/trace.h"
#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "engine/elementwise.h"
#include "engine/factories.h"
#include "engine/nn/functional.h"
#include "engine/reduce.h"

namespace memgrad::examples {
namespace {

// A block that runs under its own trace label, also when checkpoint_sequential calls it.
class LabelledBlock : public nn::UnaryModule {
 public:
  LabelledBlock(std::shared_ptr<nn::UnaryModule> block, std::string label)
      : block_(std::move(block)), label_(std::move(label)) {}
  Tensor forward(const Tensor& x) override {
    TraceLabelScope label(label_);
    return (*block_)(x);
  }
  std::string name() const override { return block_->name(); }

 private:
  std::shared_ptr<nn::UnaryModule> block_;
  std::string label_;
};

}  // namespace

CharLM::CharLM(const CharLMShape& shape, double dropout, int64_t checkpoint_segments, Device device)
    : shape_(shape), segments_(checkpoint_segments) {
  tok_ =
      register_module("tok_emb", std::make_shared<nn::Embedding>(shape.vocab, shape.width, device));
  pos_ = register_module("pos_emb",
                         std::make_shared<nn::Embedding>(shape.context, shape.width, device));
  for (int64_t l = 0; l < shape.layers; ++l) {
    // Registered as "blocks.l" (the state dict's names); run through a labelled wrapper.
    auto block = register_module(fmt::format("blocks.{}", l),
                                 std::make_shared<nn::TransformerBlock>(
                                     shape.width, shape.heads, shape.context, dropout, device));
    blocks_.push_back(std::make_shared<LabelledBlock>(block, fmt::format("block {}", l)));
  }
  ln_ = register_module("ln_f",
                        std::make_shared<nn::LayerNorm>(Shape{shape.width}, 1e-5, true, device));
  head_ = register_module("head",
                          std::make_shared<nn::Linear>(shape.width, shape.vocab,
                                                       nn::LinearOptions{true, device, kFloat32}));
}

Tensor CharLM::forward(const Tensor& idx) {
  const int64_t T = idx.size(1);
  Tensor h;
  {
    TraceLabelScope label("embeddings");
    const Tensor positions = arange(T, TensorOptions(kInt64).with_device(idx.device()));
    h = (*tok_)(idx) + (*pos_)(positions);
  }
  if (segments_ > 0 && is_training()) {
    TraceLabelScope label("checkpoint");  // what checkpoint itself saves: segment inputs
    h = autograd::checkpoint_sequential(blocks_, segments_, h);
  } else {
    for (const auto& block : blocks_) h = (*block)(h);
  }
  TraceLabelScope label("head");
  return (*head_)((*ln_)(h));
}

LossAndAccuracy charlm_loss(CharLM& model, const Tensor& input, const Tensor& target, bool amp,
                            DType amp_dtype) {
  autograd::AutocastGuard autocast(amp, amp_dtype);
  const Tensor logits = model.forward(input);
  const int64_t V = logits.size(-1);
  // A 16-bit model (master weights) gives 16-bit logits: the loss in float32, as large runs
  // compute it (autocast makes that cast itself).
  const Tensor flat = !amp && is_reduced_float(logits.dtype())
                          ? logits.reshape({-1, V}).to(kFloat32)
                          : logits.reshape({-1, V});
  const Tensor labels = target.reshape({-1});
  LossAndAccuracy out;
  {
    TraceLabelScope label("loss");
    out.loss = nn::cross_entropy(flat, labels);
  }
  NoGradGuard no_grad;
  out.accuracy = flat.argmax(1).eq(labels).sum().item_or(0.0) / static_cast<double>(labels.numel());
  return out;
}

}  // namespace memgrad::examples
