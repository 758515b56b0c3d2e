// What one training forward of the CharLM keeps until backward, part by part: the expectation
// from the shapes next to the bytes a saved-tensor pack hook measures.
//
// For a batch of B sequences of T tokens, width C, H heads, V characters and L blocks (float32,
// no dropout), the forward keeps (each tensor rounded to the allocator's 512-byte blocks):
//   embeddings        the T position indices (int64), saved by the position embedding
//   layer norms       per block ln1 and ln2: the input (B, T, C), mean and rstd (B, T) each
//   q/k/v projection  per block: its input, ln1's output (B, T, C), and q, k, v: one
//                     (B, T, 3C) buffer whose views the two attention matmuls save
//   attention probs   per block the softmax output (B, H, T, T), saved by softmax and by att @ v:
//                     the one part that grows with T^2 (the raw scores are freed at once)
//   attention output  per block (B, T, C), saved by the output projection
//   MLP               per block: ln2's output (B, T, C), the GELU's input and output (B, T, 4C)
//   final layer norm  its input, mean and rstd; the head's input, ln_f's output (B, T, C)
//   loss              the log-probabilities (B T, V) saved by cross-entropy, and the 0-d loss
// The logits (B, T, V) are not kept: cross-entropy saves its log-probabilities instead.
//
// What changes:
//   --amp                  (float16 autocast) every Linear saves a float16 copy of its input and
//                          of its weight; q/k/v, the attention output and the MLP's tensors are
//                          float16 (half the bytes); softmax runs in float32 and att @ v keeps a
//                          float16 copy of its output too (1.5x the float32 attention); layer
//                          norms, the residual stream and the loss stay float32
//   --checkpoint-segments  S segments over the L blocks: the first S - 1 keep only their input
//                          (B, T, C), the last one's blocks keep what a block keeps
//   --dropout              masks and outputs of dropout are not in the expectation (the census
//                          shows them under "anything else saved")
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "examples/charlm/charlm_model.h"

namespace memgrad::examples {

// One part of the forward's kept bytes.
struct ForwardPart {
  std::string what;
  int64_t expected = 0;
  int64_t measured = 0;
};

struct ForwardMemory {
  std::vector<ForwardPart> parts;  // the rows above, then "anything else saved" (expected 0)
  int64_t expected_total = 0;      // the parts' sum, plus the loss and expected_served_whole
  int64_t measured_total = 0;      // allocated bytes after the forward minus before
  int64_t attention = 0;           // measured attention probabilities (the T^2 part)
  int64_t expected_attention = 0;
  int64_t loss = 0;  // the 0-d loss's block, measured
  // Bytes of kept blocks beyond their rounded request: the caching allocator hands a large
  // request a whole cached block when at most 1 MiB would be left over (as PyTorch does). The
  // expectation applies that rule to each kept block; it depends on what the cache held, so it
  // is not a function of the shapes alone.
  int64_t served_whole = 0, expected_served_whole = 0;
  // Kept by the forward but saved by no node, nor the loss (0 unless something leaks).
  int64_t unaccounted = 0;
};

// How the forward runs: autocast, and the model's checkpoint segments (0: none).
struct ForwardMode {
  bool amp = false;
  int64_t checkpoint_segments = 0;
  DType amp_dtype = kFloat16;  // what autocast runs in: float16 or bfloat16 (both 2 bytes)
};

// Runs charlm_loss on `idx` (B, T) and `target` (B, T) in training mode with a pack hook sorting
// every tensor saved for backward by the trace label and op that saved it, and returns the
// parts next to their expectations. The loss, its graph and the accuracy go to `result` when
// given (the caller goes on with backward); otherwise the graph is dropped and its bytes freed.
ForwardMemory measure_forward(CharLM& model, const Tensor& idx, const Tensor& target,
                              const ForwardMode& mode, LossAndAccuracy* result = nullptr);

// What one forward keeps at one context length, split into the attention probabilities (which
// grow with T^2) and everything else (which grows with T).
struct ContextPoint {
  int64_t context = 0;
  int64_t attention = 0, expected_attention = 0;
  int64_t rest = 0, expected_rest = 0;
};

// measure_forward on a fresh model of `shape` for each of `contexts` (as the model's context and
// the batch's length), with `batch` random sequences (float32, no checkpointing, no dropout).
std::vector<ContextPoint> context_growth(CharLMShape shape, int64_t batch,
                                         const std::vector<int64_t>& contexts, Device device);

// The expected parts for a batch of `batch` sequences of `tokens` tokens (measured left 0).
ForwardMemory expected_forward(const CharLMShape& shape, int64_t batch, int64_t tokens,
                               const ForwardMode& mode = {});

}  // namespace memgrad::examples
