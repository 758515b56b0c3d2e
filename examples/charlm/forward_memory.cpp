// The forward census of the CharLM: expectations from the shapes, measurements by a pack hook.
#include "examples/charlm/forward_memory.h"

#include <array>
#include <map>
#include <set>

#include <fmt/format.h>

#include "allocator/trace.h"
#include "autograd/hooks.h"
#include "engine/factories.h"
#include "engine/memory.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

// The parts, in the order the table shows them.
enum Part : size_t {
  kEmbeddings,
  kCheckpoint,
  kLayerNorms,
  kQkv,
  kAttention,
  kAttentionOutput,
  kMlp,
  kWeightCopies,
  kFinalNorm,
  kHeadInput,
  kLogProbs,
  kOther,
  kNumParts
};

// Blocks whose insides are recorded: all, or those of the last checkpoint segment
// (checkpoint_sequential gives each segment L / S blocks and the last one the rest).
int64_t recorded_blocks(int64_t L, int64_t segments) {
  if (segments <= 1) return L;
  return L - (segments - 1) * (L / segments);
}

std::vector<ForwardPart> empty_parts(const CharLMShape& s, int64_t B, int64_t T,
                                     const ForwardMode& mode) {
  const int64_t C = s.width, H = s.heads, V = s.vocab;
  const int64_t n = recorded_blocks(s.layers, mode.checkpoint_segments);
  std::vector<ForwardPart> parts(kNumParts);
  parts[kEmbeddings].what = fmt::format("embeddings: {} position indices (int64)", T);
  parts[kCheckpoint].what = "checkpointed segments: their inputs";
  parts[kLayerNorms].what =
      fmt::format("{} x ln1, ln2: input ({}, {}, {}), mean, rstd", n, B, T, C);
  parts[kQkv].what = fmt::format("{} x q/k/v: ln1 output, q k v ({}, {}, {})", n, B, T, 3 * C);
  parts[kAttention].what =
      fmt::format("{} x attention probabilities ({}, {}, {}, {})", n, B, H, T, T);
  parts[kAttentionOutput].what = fmt::format("{} x attention output ({}, {}, {})", n, B, T, C);
  parts[kMlp].what =
      fmt::format("{} x MLP: ln2 output, GELU in and out ({}, {}, {})", n, B, T, 4 * C);
  parts[kWeightCopies].what = "float16 copies of the Linear weights";
  parts[kFinalNorm].what = "final layer norm: input, mean, rstd";
  parts[kHeadInput].what = "head: its input (ln_f output)";
  parts[kLogProbs].what = fmt::format("cross-entropy: log-probabilities ({}, {})", B * T, V);
  parts[kOther].what = "anything else saved";
  return parts;
}

// Sorts each saved tensor into a part, by the trace label and op it was saved under and its
// shape; counts each storage once and none of the tensors that existed before the forward.
class Census {
 public:
  Census(const CharLMShape& shape, int64_t batch, int64_t tokens, std::vector<Tensor> held)
      : s_(shape), B_(batch), T_(tokens), held_(std::move(held)) {}

  void add(const Tensor& t) {
    // Held tensors first, and not remembered: under ZeRO-3 a parameter's storage is gathered
    // for its layer and freed right after, and a later activation's storage may take its address.
    for (const Tensor& h : held_) {
      if (t.shares_storage_with(h)) return;
    }
    if (!seen_.insert(t.impl()->storage_ptr().get()).second) return;
    // Parts count the rounded request; a block the allocator handed out whole from a larger
    // cached one is counted apart, with the rule that allows it: a large-pool request (over
    // 1 MiB) takes the whole block when at most 1 MiB would be left over (PyTorch's rule).
    const int64_t request = rounded(static_cast<int64_t>(t.storage().nbytes()));
    const int64_t excess = static_cast<int64_t>(t.storage().allocated_nbytes()) - request;
    bytes_[part_of(t)] += request;
    excess_ += excess;
    if (request > kSmallSize && excess <= kSmallSize) permitted_excess_ += excess;
  }
  int64_t bytes(size_t part) const { return bytes_[part]; }
  int64_t excess() const { return excess_; }
  int64_t permitted_excess() const { return permitted_excess_; }

 private:
  size_t part_of(const Tensor& t) {
    const TraceContext& context = current_trace_context();
    const std::string op = context.op;
    const std::string& label = context.label;
    const int64_t C = s_.width, H = s_.heads;
    if (label == "embeddings") return kEmbeddings;
    if (label == "checkpoint") return kCheckpoint;
    if (label == "loss") return kLogProbs;
    // Under autocast each Linear also saves the float16 copy of its weight (its only 2-d input).
    if (op == "linear" && t.dim() == 2) return kWeightCopies;
    if (label == "head")
      return op == "layer_norm" ? kFinalNorm : op == "linear" ? kHeadInput : kOther;
    if (!label.starts_with("block ")) return kOther;
    const Shape& sizes = t.sizes();
    // q, k and v are views of one (B, T, 3C) buffer; with C / H == T they have the shape of the
    // attention probabilities, so the storage tells them apart.
    const bool qkv_view = t.storage().nbytes() == 3 * t.nbytes();
    if (sizes == Shape{B_, H, T_, C / H} && qkv_view) return kQkv;
    if (sizes == Shape{B_, H, T_, T_}) return kAttention;
    if (sizes == Shape{B_, T_, 4 * C}) return kMlp;
    if (op == "layer_norm") return kLayerNorms;
    if (op == "linear") {
      // The block's Linear layers save their inputs in forward order: qkv, proj, fc1 (fc2's
      // input is (B, T, 4C), above).
      const int n = ++linears_[label];
      return n == 1 ? kQkv : n == 2 ? kAttentionOutput : kMlp;
    }
    return kOther;
  }

  CharLMShape s_;
  int64_t B_, T_;
  std::vector<Tensor> held_;
  std::set<const void*> seen_;
  std::map<std::string, int> linears_;
  std::array<int64_t, kNumParts> bytes_{};
  int64_t excess_ = 0, permitted_excess_ = 0;
  static constexpr int64_t kSmallSize = int64_t{1} << 20;  // the small pool's largest request
};

}  // namespace

ForwardMemory expected_forward(const CharLMShape& s, int64_t B, int64_t T,
                               const ForwardMode& mode) {
  const int64_t C = s.width, H = s.heads, V = s.vocab, L = s.layers;
  const int64_t n = recorded_blocks(L, mode.checkpoint_segments);
  const int64_t low = mode.amp ? 2 : 4;              // bytes of what autocast runs in float16
  const int64_t act = rounded(B * T * C * 4);        // a float32 (B, T, C): the residual stream
  const int64_t act_low = rounded(B * T * C * low);  // a Linear's (B, T, C) input
  const int64_t stats = 2 * rounded(B * T * 4);      // a layer norm's mean and rstd
  const int64_t probs = rounded(B * H * T * T * 4) + (mode.amp ? rounded(B * H * T * T * 2) : 0);
  ForwardMemory m;
  m.parts = empty_parts(s, B, T, mode);
  m.parts[kEmbeddings].expected = rounded(T * 8);
  m.parts[kCheckpoint].expected = (L - n) > 0 ? (mode.checkpoint_segments - 1) * act : 0;
  m.parts[kLayerNorms].expected = n * 2 * (act + stats);
  m.parts[kQkv].expected = n * (act_low + rounded(B * T * 3 * C * low));
  m.parts[kAttention].expected = n * probs;
  m.parts[kAttentionOutput].expected = n * act_low;
  m.parts[kMlp].expected = n * (act_low + 2 * rounded(B * T * 4 * C * low));
  if (mode.amp) {
    // qkv (3C x C), proj (C x C), fc1 (4C x C), fc2 (C x 4C) per recorded block, and the head.
    m.parts[kWeightCopies].expected =
        n * (rounded(3 * C * C * 2) + rounded(C * C * 2) + 2 * rounded(4 * C * C * 2)) +
        rounded(V * C * 2);
  }
  m.parts[kFinalNorm].expected = act + stats;
  m.parts[kHeadInput].expected = act_low;
  m.parts[kLogProbs].expected = rounded(B * T * V * 4);
  m.expected_attention = m.parts[kAttention].expected;
  m.expected_total = rounded(4);  // the loss
  for (const ForwardPart& p : m.parts) m.expected_total += p.expected;
  return m;
}

ForwardMemory measure_forward(CharLM& model, const Tensor& idx, const Tensor& target,
                              const ForwardMode& mode, LossAndAccuracy* result) {
  const Device device = idx.device();
  std::vector<Tensor> held = model.parameters();
  for (const auto& [name, b] : model.named_buffers()) held.push_back(b);
  held.push_back(idx);
  held.push_back(target);
  Census census(model.shape(), idx.size(0), idx.size(1), held);
  ForwardMemory m = expected_forward(model.shape(), idx.size(0), idx.size(1), mode);
  const auto before = static_cast<int64_t>(memory_allocated(device));
  LossAndAccuracy out;
  {
    autograd::ObserveSavedTensorsGuard hooks([&census](const Tensor& t) { census.add(t); });
    out = charlm_loss(model, idx, target, mode.amp, mode.amp_dtype);
  }
  m.measured_total = static_cast<int64_t>(memory_allocated(device)) - before;
  int64_t saved = 0;
  for (size_t p = 0; p < kNumParts; ++p) {
    m.parts[p].measured = census.bytes(p);
    saved += census.bytes(p);
  }
  m.attention = census.bytes(kAttention);
  m.loss = static_cast<int64_t>(out.loss.storage().allocated_nbytes());
  m.served_whole = census.excess();
  m.expected_served_whole = census.permitted_excess();
  m.expected_total += m.expected_served_whole;
  m.unaccounted = m.measured_total - saved - m.loss - m.served_whole;
  if (result != nullptr) *result = std::move(out);
  return m;
}

std::vector<ContextPoint> context_growth(CharLMShape shape, int64_t batch,
                                         const std::vector<int64_t>& contexts, Device device) {
  std::vector<ContextPoint> points;
  for (int64_t T : contexts) {
    shape.context = T;
    CharLM model(shape, /*dropout=*/0.0, /*checkpoint_segments=*/0, device);
    const TensorOptions ints = TensorOptions(kInt64).with_device(device);
    const Tensor idx = randint(0, shape.vocab, {batch, T}, ints);
    const Tensor target = randint(0, shape.vocab, {batch, T}, ints);
    const ForwardMemory m = measure_forward(model, idx, target, {});
    points.push_back({T, m.attention, m.expected_attention, m.measured_total - m.attention,
                      m.expected_total - m.expected_attention});
  }
  return points;
}

}  // namespace memgrad::examples
