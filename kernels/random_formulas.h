// The random draws, written once for both backends (kernels/cpu/random.cpp,
// kernels/cuda/random.cu): one element's value from the Philox-4x32-10 words of its block
// (philox.h). Element i of a fill uses counter offset + i / 4 and word j = i % 4; a normal
// pair takes words 2k and 2k + 1 through Box-Muller. Every value is computed in double with
// mul_rn / add_rn, so uniform, randint and bernoulli are bit-identical on the two backends;
// normal also calls log, sin and cos, whose CUDA versions may differ from glibc's in the last
// bit of a double. Nothing here allocates.
#pragma once

#include <cstdint>

#include "kernels/philox.h"
#include "kernels/scalar_math.h"

namespace memgrad::kernels {

inline constexpr double kTwoPi = 6.283185307179586;

// The random bits a uniform draw uses: as many as the output dtype's significand holds (float64
// 32, float16 11, bfloat16 8, as PyTorch draws them; 24, a float's, for the others), so that
// rounding to the dtype never turns u < 1 into 1.
MEMGRAD_HOST_DEVICE inline int uniform_bits(bool is_float64, bool is_float16,
                                            bool is_bfloat16 = false) {
  return is_float64 ? 32 : is_float16 ? 11 : is_bfloat16 ? 8 : 24;
}

// from + span u, with u = (the top `bits` bits of word) / 2^bits, uniform in [0, 1) and exact
// in double.
MEMGRAD_HOST_DEVICE inline double uniform_draw(uint32_t word, int bits, double from, double span) {
  const double u = static_cast<double>(word >> (32 - bits)) / static_cast<double>(1ull << bits);
  return add_rn(from, mul_rn(span, u));
}

// mean + std z, z standard normal: Box-Muller on words (j & ~1, j | 1) of the block, the cosine
// for even j and the sine for odd j.
MEMGRAD_HOST_DEVICE inline double normal_draw(const Philox4& r, int j, double mean, double std) {
  const int pair = j & ~1;
  // u1 in (0, 1), never 0, so its log is finite.
  const double u1 = mul_rn(add_rn(static_cast<double>(r.w[pair]), 1.0), 1.0 / 4294967297.0);
  const double u2 = uniform_double(r.w[pair + 1]);
  const double radius = std::sqrt(mul_rn(-2.0, std::log(u1)));
  const double angle = mul_rn(kTwoPi, u2);
  const double z = mul_rn(radius, (j & 1) ? std::sin(angle) : std::cos(angle));
  return add_rn(mean, mul_rn(std, z));
}

// low + word mod range: an integer in [low, low + range) (range > 0; the modulo bias of a
// 32-bit word is accepted).
MEMGRAD_HOST_DEVICE inline double randint_draw(uint32_t word, int64_t low, uint64_t range) {
  return static_cast<double>(low + static_cast<int64_t>(word % range));
}

// 1 with probability p, else 0.
MEMGRAD_HOST_DEVICE inline double bernoulli_draw(uint32_t word, double p) {
  return uniform_double(word) < p ? 1.0 : 0.0;
}

}  // namespace memgrad::kernels
