// Half <-> float conversions through Eigen::half (hardware F16C instructions where available).
#include "kernels/dtype.h"

#include <Eigen/Core>

namespace memgrad {

float half_to_float(Half h) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h.bits));
}

Half float_to_half(float f) { return Half{Eigen::numext::bit_cast<uint16_t>(Eigen::half(f))}; }

}  // namespace memgrad
