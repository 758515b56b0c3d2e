// The character-level transformer of train_charlm (GPT-2 layout): token and position
// embeddings, `layers` blocks of pre-norm causal self-attention and a 4x-wide GELU MLP, a final
// layer norm and a linear head. Shared by the program and the tests of its memory report.
//
// Each part of the forward runs under a trace label ("embeddings", "block 0", ..., "head"), so
// allocator traces and the forward census (forward_memory.h) can tell the blocks apart.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/nn/attention.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"

namespace memgrad::examples {

// The sizes of a CharLM and of its batches.
struct CharLMShape {
  int64_t vocab = 0;    // V: distinct characters
  int64_t width = 0;    // C: embedding size
  int64_t layers = 0;   // L: transformer blocks
  int64_t heads = 0;    // H: attention heads (C divisible by H)
  int64_t context = 0;  // T_max: the longest sequence (position table, causal mask)
};

class CharLM : public nn::UnaryModule {
 public:
  // Allocates: every parameter (see num_parameters()) and one T_max x T_max bool causal mask
  // per block. `checkpoint_segments` > 0 checkpoints the blocks in that many segments.
  CharLM(const CharLMShape& shape, double dropout, int64_t checkpoint_segments, Device device);
  // idx (B, T) int64 -> logits (B, T, V). Saves for backward what each layer saves.
  Tensor forward(const Tensor& idx) override;
  std::string name() const override { return "CharLM"; }
  const CharLMShape& shape() const { return shape_; }
  int64_t context() const { return shape_.context; }

 private:
  CharLMShape shape_;
  int64_t segments_;  // activation checkpointing over the blocks (0: off)
  std::shared_ptr<nn::Embedding> tok_, pos_;
  std::vector<std::shared_ptr<nn::UnaryModule>> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::Linear> head_;
};

// The training loss of a batch and the next-character accuracy of its predictions.
struct LossAndAccuracy {
  Tensor loss;      // 0-d: mean cross-entropy over the B x T positions (recorded for backward)
  double accuracy;  // fraction of positions whose argmax character is the target
};

// Runs the model on `input` (B, T) and scores it against `target` (B, T), under autocast when
// `amp` (in `amp_dtype`); a 16-bit model's logits are scored in float32. The cross-entropy runs
// under the trace label "loss". Keeps: what the forward saves and the loss; the logits and the
// accuracy's temporaries are freed before it returns.
LossAndAccuracy charlm_loss(CharLM& model, const Tensor& input, const Tensor& target, bool amp,
                            DType amp_dtype = kFloat16);

}  // namespace memgrad::examples
