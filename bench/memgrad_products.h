// The step's products through memgrad's matmul (bench/step_gemms.h), for the benchmarks that
// time them alone.
#pragma once

#include <cstdint>

#include "bench/step_gemms.h"
#include "engine/factories.h"
#include "engine/linalg.h"

namespace bench {

inline auto memgrad_products() {
  return product_runner(
      [](int64_t b, int64_t r, int64_t c) {
        return memgrad::randn({b, r, c});
      },
      [](const memgrad::Tensor& a, const memgrad::Tensor& b) { (void)memgrad::matmul(a, b); });
}

}  // namespace bench
