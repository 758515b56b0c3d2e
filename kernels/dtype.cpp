// Half and BFloat16 <-> float conversions through Eigen::half (hardware F16C instructions where
// available) and Eigen::bfloat16.
#include "kernels/dtype.h"

#include <Eigen/Core>

namespace memgrad {

float half_to_float(Half h) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h.bits));
}

Half float_to_half(float f) { return Half{Eigen::numext::bit_cast<uint16_t>(Eigen::half(f))}; }

float bfloat16_to_float(BFloat16 b) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(b.bits));
}

BFloat16 float_to_bfloat16(float f) {
  return BFloat16{Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f))};
}

}  // namespace memgrad
