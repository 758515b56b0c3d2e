// The engine errors' messages that are built from their fields.
#include "engine/error.h"

#include <algorithm>

#include <fmt/format.h>

namespace memgrad {

IndexError IndexError::dim_out_of_range(std::string op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, like PyTorch
  std::string message =
      fmt::format("[{}] dimension out of range (expected to be in range of [{}, {}], but got {})",
                  op, -n, n - 1, dim);
  return IndexError(std::move(message), std::move(op), {.dim = dim, .ndim = ndim});
}

}  // namespace memgrad
