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
  } else if (kind == "meta") {
    type_ = DeviceType::Meta;
  } else {
    throw DeviceError(
        fmt::format("[device] unknown device '{}' (expected cpu, sim[:N], cuda[:N] or meta[:N])",
                    text),
        "device", {std::string(text)});
  }
  index_ = static_cast<int8_t>(index);
}

namespace {

const char* kind_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::Sim: return "sim";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
  }
  return "unknown";
}

}  // namespace

void Device::throw_bad_index(DeviceType type, int index) {
  if (type == DeviceType::CPU) {
    throw DeviceError(fmt::format("[device] cpu index {}: there is one cpu, cpu:0", index),
                      "device", {fmt::format("cpu:{}", index)});
  }
  throw DeviceError(fmt::format("[device] {} index {} is out of range (expected 0..{})",
                                kind_name(type), index, kMaxIndex),
                    "device", {fmt::format("{}:{}", kind_name(type), index)});
}

std::string Device::str() const {
  if (type_ == DeviceType::CPU) return "cpu";
  return fmt::format("{}:{}", kind_name(type_), index_);
}

}  // namespace memgrad
