// Helpers of the kernel backend interface shared by every backend.
#include "kernels/backend.h"

namespace memgrad::kernels {

GemmArgs gemm_group(const GemmArgs& g, int64_t o) {
  const auto es = static_cast<int64_t>(element_size(g.dtype));
  GemmArgs one = g;
  one.a.data = static_cast<const char*>(g.a.data) + o * g.outer_stride_a * es;
  one.b.data = static_cast<const char*>(g.b.data) + o * g.outer_stride_b * es;
  one.c = static_cast<char*>(g.c) + o * g.outer_stride_c * es;
  one.outer = 1;
  one.outer_stride_a = one.outer_stride_b = one.outer_stride_c = 0;
  return one;
}

}  // namespace memgrad::kernels
