// Generators: (seed, offset) under a mutex, one default generator per device.
#include "engine/generator.h"

#include <array>
#include <memory>

namespace memgrad {
namespace {

constexpr int kMaxIndex = 64;

struct Generators {
  std::mutex mutex;
  uint64_t seed = Generator::kDefaultSeed;  // for generators created after manual_seed
  Generator cpu;
  std::array<std::unique_ptr<Generator>, kMaxIndex> sim;
  std::array<std::unique_ptr<Generator>, kMaxIndex> cuda;
  std::array<std::unique_ptr<Generator>, kMaxIndex> meta;  // advances as a real device's would
};

Generators& generators() {
  static Generators* g = new Generators();  // immortal, like the allocator registry
  return *g;
}

}  // namespace

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = {seed, 0};
}

GeneratorState Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void Generator::set_state(const GeneratorState& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = state;
}

uint64_t Generator::advance(uint64_t counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t first = state_.offset;
  state_.offset += counters;
  return first;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_.seed;
}

Generator& default_generator(Device device) {
  Generators& g = generators();
  if (device.is_cpu()) return g.cpu;
  auto& table = device.is_sim() ? g.sim : device.is_meta() ? g.meta : g.cuda;
  const auto index = static_cast<size_t>(device.index()) % kMaxIndex;
  std::lock_guard<std::mutex> lock(g.mutex);
  if (!table[index]) table[index] = std::make_unique<Generator>(g.seed);
  return *table[index];
}

void manual_seed(uint64_t seed) {
  Generators& g = generators();
  g.cpu.manual_seed(seed);
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  for (auto* table : {&g.sim, &g.cuda, &g.meta}) {
    for (auto& gen : *table) {
      if (gen) gen->manual_seed(seed);
    }
  }
}

}  // namespace memgrad
