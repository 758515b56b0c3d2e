// Training checkpoints on top of safetensors.
#include "engine/io/checkpoint.h"

#include <charconv>
#include <cmath>
#include <limits>

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
                                      path, key),
                          "checkpoint", path, key);
  }
  return it->second;
}

// Metadata numbers are decimal digits only (a leading '-' where negative values make sense),
// and must fit their type: "12abc", "" and "-1" for a seed are errors naming the key.
int64_t parse_int(const std::map<std::string, std::string>& meta, const std::string& key,
                  const std::string& path, int64_t min) {
  const std::string text = require(meta, key, path);
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc() || stop != end || value < min) {
    throw CheckpointError(fmt::format("[checkpoint] '{}': metadata {} is \"{}\", expected an "
                                      "integer >= {}",
                                      path, key, text, min),
                          "checkpoint", path, key);
  }
  return value;
}

uint64_t parse_unsigned(const std::map<std::string, std::string>& meta, const std::string& key,
                        const std::string& path) {
  const std::string text = require(meta, key, path);
  uint64_t value = 0;
  auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || stop != text.data() + text.size()) {
    throw CheckpointError(fmt::format("[checkpoint] '{}': metadata {} is \"{}\", expected an "
                                      "integer in [0, 2^64)",
                                      path, key, text),
                          "checkpoint", path, key);
  }
  return value;
}

// The optimizer's scalars: a JSON object of finite numbers.
std::map<std::string, double> parse_scalars(const std::map<std::string, std::string>& meta,
                                            const std::string& path) {
  const std::string text = require(meta, "optimizer_scalars", path);
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    throw CheckpointError(fmt::format("[checkpoint] '{}': metadata optimizer_scalars is not a "
                                      "JSON object of numbers",
                                      path),
                          "checkpoint", path, "optimizer_scalars");
  }
  std::map<std::string, double> scalars;
  for (const auto& [key, value] : json.items()) {
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      throw CheckpointError(fmt::format("[checkpoint] '{}': optimizer scalar {} is {}, expected a "
                                        "finite number",
                                        path, key, value.dump()),
                            "checkpoint", path, key);
    }
    scalars[key] = value.get<double>();
  }
  return scalars;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const TrainingState& state) {
  SafetensorsFile file;
  for (const auto& [name, t] : model.state_dict())
    file.tensors.emplace_back(std::string(kModel) + name, t);
  const optim::OptimizerState opt = optimizer.state_dict();
  for (const auto& [name, t] : opt.tensors)
    file.tensors.emplace_back(std::string(kOptim) + name, t);
  nlohmann::json scalars = opt.scalars;
  file.metadata = state.extra;
  file.metadata["format"] = "memgrad-training-checkpoint-1";
  file.metadata["optimizer"] = optimizer.name();
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
    throw CheckpointError(
        fmt::format("[checkpoint] '{}' has an unknown format '{}'", path, file.metadata["format"]),
        "checkpoint", path, "format");
  }
  nn::StateDict model_state;
  optim::OptimizerState opt;
  for (auto& [name, t] : file.tensors) {
    if (name.starts_with(kModel)) {
      model_state.emplace_back(name.substr(kModel.size()), t);
    } else if (name.starts_with(kOptim)) {
      opt.tensors.emplace_back(name.substr(kOptim.size()), t);
    } else {
      throw CheckpointError(
          fmt::format("[checkpoint] '{}' holds an unexpected tensor '{}'", path, name),
          "checkpoint", path, name);
    }
  }
  TrainingState state;
  state.step = parse_int(file.metadata, "step", path, 0);
  state.epoch = parse_int(file.metadata, "epoch", path, 0);
  state.generator.seed = parse_unsigned(file.metadata, "generator_seed", path);
  state.generator.offset = parse_unsigned(file.metadata, "generator_offset", path);
  opt.scalars = parse_scalars(file.metadata, path);
  if (auto it = file.metadata.find("optimizer");
      it != file.metadata.end() && it->second != optimizer.name()) {
    throw CheckpointError(fmt::format("[checkpoint] '{}' holds the state of {}, not of the {} it "
                                      "is loaded into",
                                      path, it->second, optimizer.name()),
                          "checkpoint", path, "optimizer");
  }
  // All or nothing: the model's state is checked, the optimizer loads (itself all or nothing),
  // and only then are the model's values copied in, which cannot fail once checked.
  (void)model.check_state_dict(model_state, /*strict=*/true);
  optimizer.load_state_dict(opt);
  model.load_state_dict(model_state, /*strict=*/true);
  default_generator(device).set_state(state.generator);
  for (const auto& [k, v] : file.metadata) {
    if (k != "format" && k != "step" && k != "epoch" && !k.starts_with("generator_") &&
        k != "optimizer_scalars" && k != "optimizer") {
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
