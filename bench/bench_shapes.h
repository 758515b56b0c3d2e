// The sizes of the benchmarks' two training steps, defined once for memgrad's side and the
// libtorch peers alike (a peer cannot include bench/bench_mlp.h or examples/charlm, which define
// memgrad models): the reference MLP of train_bench and dist_bench, and train_charlm's
// transformer with the example's default flags (train_charlm_bench). bench/peer/
// torch_dist_peer.py, in Python, spells the MLP's sizes again; dist_bench's same-start figures
// compare the two sides' losses, so a difference there shows.
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

// 784-512-512-10 with ReLU on a (global) batch of 128 rows, from a pool of 16 batches.
inline constexpr int64_t kMlpBatch = 128;
inline constexpr int64_t kMlpInputs = 784;
inline constexpr int64_t kMlpHidden = 512;
inline constexpr int64_t kMlpClasses = 10;
inline constexpr int kMlpPoolBatches = 16;
// The layers' widths, inputs first.
inline const std::vector<int64_t> kMlpWidths = {kMlpInputs, kMlpHidden, kMlpHidden, kMlpClasses};

// train_charlm's transformer: vocabulary 86 (the default text's), width 128, 2 blocks, 4 heads,
// context 64, batch 32 sequences, from a pool of 16 batches. The charlm benchmark and its peer
// read the short names through `using namespace bench::charlm;`.
namespace charlm {
inline constexpr int64_t kVocab = 86;
inline constexpr int64_t kWidth = 128;
inline constexpr int64_t kLayers = 2;
inline constexpr int64_t kHeads = 4;
inline constexpr int64_t kContext = 64;
inline constexpr int64_t kBatch = 32;
inline constexpr int kPoolBatches = 16;
}  // namespace charlm

// The same sizes as one value.
struct TransformerSizes {
  int64_t vocab, width, layers, heads, context, batch;
};
inline constexpr TransformerSizes kCharlm = {charlm::kVocab, charlm::kWidth,   charlm::kLayers,
                                             charlm::kHeads, charlm::kContext, charlm::kBatch};

}  // namespace bench
