// Training checkpoints: model, optimizer, step and generator state in one safetensors file,
// written atomically, so that resuming gives the same losses as an uninterrupted run.
#pragma once

#include <cstdint>
#include <string>

#include "engine/generator.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"

namespace memgrad::io {

struct TrainingState {
  int64_t step = 0;
  int64_t epoch = 0;
  GeneratorState generator;                  // the model device's default generator
  std::map<std::string, std::string> extra;  // free-form (e.g. the loss history)
};

// Writes model ("model." + name), optimizer state ("optim." + name) and `state` to `path`
// (atomically: see save_safetensors).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const TrainingState& state);

// Restores a checkpoint written by save_checkpoint into `model` and `optimizer` (strict), sets
// the device generator's state and returns the training state. Throws CheckpointError.
TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer);

// A model's state dict alone.
void save_state_dict(const std::string& path, const nn::StateDict& state);
nn::StateDict load_state_dict(const std::string& path, Device device = kCPU);

}  // namespace memgrad::io
