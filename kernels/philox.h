// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator. Four 32-bit words are a pure function of (key, counter), so any
// thread can produce any part of a random tensor without sharing state. Header-only so the CPU
// kernels, the CUDA kernels and the engine's Generator use one definition.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace memgrad::kernels {

struct Philox4 {
  uint32_t w[4];
};

MEMGRAD_HOST_DEVICE inline Philox4 philox4x32(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// A uniform double in [0, 1) from 32 random bits.
MEMGRAD_HOST_DEVICE inline double uniform_double(uint32_t bits) {
  return static_cast<double>(bits) * (1.0 / 4294967296.0);
}

}  // namespace memgrad::kernels
