// Byte units, and the sizes of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp)
// under the names PyTorch gives them: the caching policy follows them rule for rule, and the lab
// policies, the frame's pool of a segment and the model tests measure against them.
#pragma once

#include <cstddef>

namespace memgrad {

inline constexpr size_t kKiB = 1024;
inline constexpr size_t kMiB = 1024 * kKiB;
inline constexpr size_t kGiB = 1024 * kMiB;

inline constexpr size_t kMinBlockSize = 512;       // every block size is a multiple of this
inline constexpr size_t kSmallSize = 1 * kMiB;     // largest request served by the small pool
inline constexpr size_t kSmallBuffer = 2 * kMiB;   // small-pool segment size
inline constexpr size_t kLargeBuffer = 20 * kMiB;  // large-pool segment for 1-10 MiB requests
inline constexpr size_t kMinLargeAlloc =
    10 * kMiB;  // from here segments are rounded to kRoundLarge
inline constexpr size_t kRoundLarge = 2 * kMiB;

// The segment the caching allocator obtains for a block of `rounded` bytes (a multiple of
// kMinBlockSize): kSmallBuffer up to kSmallSize, kLargeBuffer below kMinLargeAlloc, else
// `rounded` rounded up to kRoundLarge.
constexpr size_t caching_segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace memgrad
