// Device parsing and printing.
#include "engine/device.h"

#include <charconv>

#include <fmt/format.h>

#include "engine/error.h"

namespace memgrad {

Device::Device(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0 ||
        index > kMaxIndex) {
      throw DeviceError(
          fmt::format("[device] bad device index in '{}' (expected 0..{})", text, kMaxIndex),
          "device", {std::string(text)});
    }
  }
  if (kind == "cpu") {
    if (index != 0) {
      throw DeviceError(fmt::format("[device] '{}': there is one cpu, cpu:0", text), "device",
                        {std::string(text)});
    }
    type_ = DeviceType::CPU;
  } else if (kind == "sim") {
    type_ = DeviceType::Sim;
  } else if (kind == "cuda") {
    type_ = DeviceType::CUDA;
  } else {
    throw DeviceError(
        fmt::format("[device] unknown device '{}' (expected cpu, sim[:N] or cuda[:N])", text),
        "device", {std::string(text)});
  }
  index_ = static_cast<int8_t>(index);
}

void Device::throw_bad_index(DeviceType type, int index) {
  if (type == DeviceType::CPU) {
    throw DeviceError(fmt::format("[device] cpu index {}: there is one cpu, cpu:0", index),
                      "device", {fmt::format("cpu:{}", index)});
  }
  throw DeviceError(fmt::format("[device] {} index {} is out of range (expected 0..{})",
                                type == DeviceType::Sim ? "sim" : "cuda", index, kMaxIndex),
                    "device",
                    {fmt::format("{}:{}", type == DeviceType::Sim ? "sim" : "cuda", index)});
}

std::string Device::str() const {
  switch (type_) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::Sim: return fmt::format("sim:{}", index_);
    case DeviceType::CUDA: return fmt::format("cuda:{}", index_);
  }
  return "unknown";
}

}  // namespace memgrad
