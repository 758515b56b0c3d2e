// Random number generation: a counter-based Philox-4x32-10 generator per device.
//
// The whole state is two numbers (seed, offset), so it can be saved and restored exactly:
// checkpointing saves it before a forward and restores it before the recomputation so dropout
// draws the same mask. Each draw of n values advances the offset by the number of 128-bit
// counters used, and every value depends only on (seed, counter), so CPU threads (and CUDA
// threads) can generate disjoint parts of a tensor in parallel with identical results.
#pragma once

#include <cstdint>
#include <mutex>

#include "engine/device.h"

namespace memgrad {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // counters consumed so far
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : state_{seed, 0} {}

  void manual_seed(uint64_t seed);
  GeneratorState get_state() const;
  void set_state(const GeneratorState& state);

  // Reserves `counters` consecutive 128-bit counters and returns the first one's offset.
  // Thread-safe.
  uint64_t advance(uint64_t counters);
  uint64_t seed() const;

  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

// The default generator of `device`.
Generator& default_generator(Device device = kCPU);

// Seeds the default generator of every device (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace memgrad
