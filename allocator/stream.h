// Streams as the allocator sees them: an opaque number.
//
// The allocator never touches a stream; it only remembers which stream a block was allocated on
// (a freed block is reused only on that stream) and, for the CUDA backend, which other streams
// used it. The CUDA layer maps its cudaStream_t handles to these ids; the CPU has one stream, 0.
#pragma once

#include <cstdint>

namespace memgrad {

using StreamId = uint64_t;
inline constexpr StreamId kDefaultStream = 0;

}  // namespace memgrad
