// Allocator configuration: MEMGRAD_ALLOC_CONF and the same settings through the C++ API.
//
// The text form is PyTorch's PYTORCH_CUDA_ALLOC_CONF form, "key:value,key:value", e.g.
//   MEMGRAD_ALLOC_CONF="policy:caching,max_split_size_mb:64,roundup_power2_divisions:4"
// Parsing is strict: an unknown key, a malformed value or a value out of range throws a
// ConfigError naming the key and the value, so a typo fails at start instead of being ignored.
// PyTorch's `expandable_segments:True` is accepted as another spelling of `policy:expandable`
// (`False` keeps the default); written together with a different policy it is an error. The
// planned policy's keys (planned_plan, planned_warmup_steps) are memgrad's own and are accepted
// only with policy:planned.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "allocator/sizes.h"

namespace memgrad {

// Number of power-of-two size buckets for roundup_power2_divisions: bucket i covers
// [2^i MiB, 2^(i+1) MiB); bucket 0 also covers sizes below 1 MiB, the last one everything above.
inline constexpr size_t kRoundupIntervals = 16;

struct AllocatorConfig {
  // Which policy hands out the bytes: a name of the policy table (lab/policy_registry.h);
  // "caching" by default. make_allocator refuses a name the table does not hold.
  std::string policy = "caching";
  // Blocks of this size or more are never split (bytes). SIZE_MAX: no limit (PyTorch's default).
  size_t max_split_size = SIZE_MAX;
  // How much larger than a request an unsplit cached block may be and still be used (bytes).
  size_t max_non_split_rounding_size = 20 * kMiB;
  // Per size bucket: round requests up to one of N equal steps between powers of two (0 or 1:
  // plain 512-byte rounding).
  std::array<size_t, kRoundupIntervals> roundup_power2_divisions{};
  // In (0, 1): with a memory fraction set, free old cached blocks once reserved memory passes
  // this fraction of the allowed memory. 0: off.
  double garbage_collection_threshold = 0.0;
  // In (0, 1]: the policy may reserve at most this fraction of the source's capacity.
  double memory_fraction = 1.0;
  // policy:planned only. A plan file (lab_replay plan) or a memgrad trace to plan from (its first
  // step); empty: none. The text form cannot hold ',', ':', '[', ']' or spaces, so neither can
  // the path (validate() says so).
  std::string planned_plan;
  // policy:planned only. Steps recorded live before planning from the last of them (at least 1);
  // 0: not set (without a plan the policy then records kDefaultPlannedWarmupSteps).
  size_t planned_warmup_steps = 0;

  // Parses the "key:value,..." text. Throws ConfigError.
  static AllocatorConfig parse(std::string_view text);
  // Parses the environment variable `var` (empty or unset: the defaults). Throws ConfigError.
  static AllocatorConfig from_env(const char* var = "MEMGRAD_ALLOC_CONF");

  // Checks every field's range (the C++ API path). Throws ConfigError.
  void validate() const;

  // The divisions for a request of `nbytes` (its bucket's value).
  size_t divisions_for(size_t nbytes) const;

  // The settings in MEMGRAD_ALLOC_CONF form; parse(to_string()) gives the same config.
  std::string to_string() const;

 private:
  void validate_planned() const;  // the planned keys: their policy, together, the path's text
};

// The warm-up of policy:planned when neither planned_plan nor planned_warmup_steps is given: the
// first step of a training loop creates the optimizer's state, the second is the steady one.
inline constexpr size_t kDefaultPlannedWarmupSteps = 2;
// The most warm-up steps planned_warmup_steps accepts.
inline constexpr size_t kMaxPlannedWarmupSteps = 1000;

// Parses a size such as "256MiB", "1.5GiB", "512KiB", "4096" (bytes). K/M/G and KiB/MiB/GiB
// are powers of 1024; KB/MB/GB powers of 1000. Throws ConfigError naming `what` for anything
// else, for a negative, infinite or NaN value, and for more than 2^64 bytes.
size_t parse_memory_size(std::string_view text, std::string_view what = "size");

}  // namespace memgrad
