// Training checkpoints on top of safetensors.
#include "engine/io/checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/safetensors.h"

namespace memgrad::io {
namespace {

constexpr std::string_view kModel = "model.";
constexpr std::string_view kOptim = "optim.";

std::string require(const std::map<std::string, std::string>& meta, const std::string& key,
                    const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) {
    throw CheckpointError(fmt::format("[checkpoint] '{}' has no '{}' entry: not a training "
                                      "checkpoint written by memgrad",
                                      path, key));
  }
  return it->second;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const TrainingState& state) {
  SafetensorsFile file;
  for (const auto& [name, t] : model.state_dict()) file.tensors.emplace_back(std::string(kModel) + name, t);
  const optim::OptimizerState opt = optimizer.state_dict();
  for (const auto& [name, t] : opt.tensors) file.tensors.emplace_back(std::string(kOptim) + name, t);
  nlohmann::json scalars = opt.scalars;
  file.metadata = state.extra;
  file.metadata["format"] = "memgrad-training-checkpoint-1";
  file.metadata["step"] = std::to_string(state.step);
  file.metadata["epoch"] = std::to_string(state.epoch);
  file.metadata["generator_seed"] = std::to_string(state.generator.seed);
  file.metadata["generator_offset"] = std::to_string(state.generator.offset);
  file.metadata["optimizer_scalars"] = scalars.dump();
  save_safetensors(path, file);
}

TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer) {
  const Device device = model.parameters().empty() ? kCPU : model.parameters()[0].device();
  SafetensorsFile file = load_safetensors(path, device);
  if (require(file.metadata, "format", path) != "memgrad-training-checkpoint-1") {
    throw CheckpointError(fmt::format("[checkpoint] '{}' has an unknown format '{}'", path,
                                      file.metadata["format"]));
  }
  nn::StateDict model_state;
  optim::OptimizerState opt;
  for (auto& [name, t] : file.tensors) {
    if (name.starts_with(kModel)) {
      model_state.emplace_back(name.substr(kModel.size()), t);
    } else if (name.starts_with(kOptim)) {
      opt.tensors.emplace_back(name.substr(kOptim.size()), t);
    } else {
      throw CheckpointError(fmt::format("[checkpoint] '{}' holds an unexpected tensor '{}'", path, name));
    }
  }
  TrainingState state;
  try {
    const nlohmann::json scalars = nlohmann::json::parse(require(file.metadata, "optimizer_scalars", path));
    opt.scalars = scalars.get<std::map<std::string, double>>();
    state.step = std::stoll(require(file.metadata, "step", path));
    state.epoch = std::stoll(require(file.metadata, "epoch", path));
    state.generator.seed = std::stoull(require(file.metadata, "generator_seed", path));
    state.generator.offset = std::stoull(require(file.metadata, "generator_offset", path));
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("[checkpoint] '{}' has malformed metadata ({})", path, e.what()));
  }
  model.load_state_dict(model_state, /*strict=*/true);
  optimizer.load_state_dict(opt);
  default_generator(device).set_state(state.generator);
  for (const auto& [k, v] : file.metadata) {
    if (k != "format" && k != "step" && k != "epoch" && !k.starts_with("generator_") &&
        k != "optimizer_scalars") {
      state.extra[k] = v;
    }
  }
  return state;
}

void save_state_dict(const std::string& path, const nn::StateDict& state) {
  save_safetensors(path, SafetensorsFile{state, {}});
}

nn::StateDict load_state_dict(const std::string& path, Device device) {
  return load_safetensors(path, device).tensors;
}

}  // namespace memgrad::io
