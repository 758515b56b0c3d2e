// The step's products through libtorch's matmul (bench/step_gemms.h), for the peers that time
// them alone.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "bench/step_gemms.h"

namespace bench {

inline auto torch_products() {
  return product_runner(
      [](int64_t b, int64_t r, int64_t c) {
        return torch::randn({b, r, c});
      },
      [](const torch::Tensor& a, const torch::Tensor& b) { (void)torch::matmul(a, b); });
}

}  // namespace bench
