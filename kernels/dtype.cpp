// Half <-> float conversions through Eigen::half (hardware F16C instructions where available).
#include "kernels/dtype.h"

#include <Eigen/Core>

#include <cstring>

namespace memgrad {

float half_to_float(Half h) {
  Eigen::half e;
  std::memcpy(&e, &h.bits, sizeof(h.bits));
  return static_cast<float>(e);
}

Half float_to_half(float f) {
  const Eigen::half e(f);
  Half h;
  std::memcpy(&h.bits, &e, sizeof(h.bits));
  return h;
}

}  // namespace memgrad
