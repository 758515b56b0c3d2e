// Devices: where a tensor's bytes live and which kernels compute on them.
//
//   cpu      host memory through the caching allocator (or a bounded simulated device when
//            MEMGRAD_CPU_MEMORY_LIMIT is set)
//   sim:N    a simulated device with a fixed capacity (default 1 GiB, see memory.h), computing
//            with the CPU kernels: out-of-memory, fragmentation and multi-device programs
//            reproduce on any machine
//   cuda:N   an NVIDIA GPU (builds with the CUDA backend)
//   meta:N   shapes without values: tensors, views, autograd and the allocator behave as on a
//            device of that capacity (default 80 GiB, see memory.h), no kernel runs and no page
//            is touched, so a program's memory can be known without running it. Reading a
//            value (item, printing, a copy to another device) is a DeviceError naming the op.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memgrad {

enum class DeviceType : uint8_t { CPU, Sim, CUDA, Meta };

class Device {
 public:
  // The largest index of a sim or cuda device.
  static constexpr int kMaxIndex = 63;

  // The CPU.
  constexpr Device() = default;
  // `index` must be 0 for the cpu and 0..kMaxIndex for sim and cuda; anything else throws
  // DeviceError naming the valid range, so every Device names a registry slot of its own.
  constexpr Device(DeviceType type, int index) : type_(type), index_(static_cast<int8_t>(index)) {
    if (index < 0 || index > (type == DeviceType::CPU ? 0 : kMaxIndex)) {
      throw_bad_index(type, index);
    }
  }
  // Parses "cpu", "sim", "sim:1", "cuda", "cuda:1", "meta", "meta:1" (no index means 0). Throws
  // DeviceError for anything else.
  Device(std::string_view text);  // NOLINT: implicit, like torch.device("cuda:0")
  Device(const char* text) : Device(std::string_view(text)) {}  // NOLINT

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_sim() const { return type_ == DeviceType::Sim; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  bool is_meta() const { return type_ == DeviceType::Meta; }
  // Whether CPU kernels can compute on its memory (cpu and sim).
  bool is_host() const { return type_ == DeviceType::CPU || type_ == DeviceType::Sim; }

  // "cpu", "sim:0", "cuda:1", "meta:0".
  std::string str() const;

  bool operator==(const Device&) const = default;

 private:
  [[noreturn]] static void throw_bad_index(DeviceType type, int index);

  DeviceType type_ = DeviceType::CPU;
  int8_t index_ = 0;
};

inline constexpr Device kCPU{};

}  // namespace memgrad
