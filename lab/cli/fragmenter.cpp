// fragmenter: a synthetic program that fragments a caching allocator, for the policy lab's
// traces (traces/fragmentation.json, tools/make_traces.py).
//
// Each iteration is a "training step" whose batch size changes from step to step, the pattern
// PyTorch's expandable segments were made for: the forward allocates activations proportional to
// the batch (1.5-8 MiB each), the backward frees them in reverse while briefly allocating
// gradients, and every step leaves behind a small tensor (its metrics, 64 KiB, kept for the whole
// run) and, every third step, a batch-sized tensor kept for three steps (a checkpoint). The
// long-lived pieces land between the short-lived ones, so a best-fit cache keeps splitting
// segments whose tails no later batch fits. The program prints the allocator's peaks; run it
// under MEMGRAD_TRACE (or `./memgrad lab record -- fragmenter`) and replay the trace.
//
//   ./memgrad example fragmenter [--steps 12] [--scale 1]
#include <cstdio>
#include <deque>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "engine/memgrad.h"

using namespace memgrad;

namespace {

constexpr int64_t kFloatsPerMiB = 256 * 1024;
constexpr int64_t kLayers = 4;
// Batch sizes in "units" (one unit of activation = 0.5 MiB x scale): varying, never monotone.
constexpr int64_t kBatchUnits[] = {7, 12, 5, 16, 9, 14, 3, 11, 15, 6, 13, 8, 10, 4, 16, 7};

Tensor floats(int64_t numel, Device device) {
  return empty({numel}, TensorOptions(kFloat32).with_device(device));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A synthetic program whose changing batch sizes fragment a caching allocator."};
  int64_t steps = 12;
  int64_t scale = 1;
  std::string device_name = "cpu";
  bool describe = false;
  app.add_option("--steps", steps, "Training-like steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--scale", scale, "Multiplies every tensor size")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--device", device_name, "cpu or sim:N")->capture_default_str();
  app.add_flag("--describe", describe, "Print a one-line description and exit");
  CLI11_PARSE(app, argc, argv);
  if (describe) {
    fmt::print(
        "a synthetic program whose changing batch sizes fragment a caching allocator "
        "(the policy lab's fragmentation trace)\n");
    return 0;
  }
  try {
    const Device device(device_name);
    const int64_t unit = kFloatsPerMiB / 2 * scale;  // 0.5 MiB of float32
    std::vector<Tensor> metrics;                     // kept for the whole run
    std::deque<Tensor> checkpoints;                  // kept for three steps
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t batch = kBatchUnits[step % std::size(kBatchUnits)];
      TraceLabelScope label(fmt::format("step {}", step));
      std::vector<Tensor> activations;
      {
        TracePhaseScope phase("forward");
        for (int64_t layer = 0; layer < kLayers; ++layer) {
          activations.push_back(floats(batch * unit * (layer % 2 == 0 ? 1 : 2) / 2 + unit, device));
        }
        if (step % 3 == 0) checkpoints.push_back(floats(batch * unit, device));
      }
      {
        TracePhaseScope phase("backward");
        while (!activations.empty()) {
          const Tensor grad = floats(activations.back().numel(), device);
          activations.pop_back();
        }
      }
      {
        TracePhaseScope phase("optimizer");
        metrics.push_back(floats(16 * 1024, device));  // 64 KiB
        if (checkpoints.size() > 1 && step % 3 == 2) checkpoints.pop_front();
      }
    }
    fmt::print("{} steps on {}: peak allocated {:.2f} MiB, peak reserved {:.2f} MiB ({} policy)\n",
               steps, device.str(),
               static_cast<double>(max_memory_allocated(device)) / (1024.0 * 1024.0),
               static_cast<double>(max_memory_reserved(device)) / (1024.0 * 1024.0),
               allocator_for(device).policy_name());
    return 0;
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "fragmenter: error: %s\n", e.what());
    return 1;
  }
}
