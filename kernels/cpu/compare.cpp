// CPU comparison kernels: eq, ne, lt, le, gt, ge into a bool tensor (or one of the inputs'
// dtype), with their own row function so the arithmetic rows are never stamped out for bool
// outputs. The loops and the names they use: kernels/cpu/elementwise_rows.h.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_rows.h"
#include "kernels/elementwise_formulas.h"

namespace memgrad::kernels::cpu::detail {
namespace {

// out = (a OP b) over one row, the inputs of type T and the output of type R (bool, or T).
template <typename T, typename R>
void compare_row(BinaryOp op, char* o, const char* a, const char* b, int64_t so, int64_t sa,
                 int64_t sb, int64_t n) {
  using C = compute_t<T>;
  map2<T, R>(o, a, b, so, sa, sb, n, [op](C x, C y) { return binary_value(op, x, y, C(1)); });
}

}  // namespace

void compare(BinaryOp op, const Operand& out, const Operand& a, const Operand& b) {
  const std::array<const Operand*, 3> ops = {&out, &a, &b};
  if (a.dtype == b.dtype && a.dtype != DType::Bool &&
      (out.dtype == a.dtype || out.dtype == DType::Bool)) {
    const LoopNest<3> nest = LoopNest<3>::make(ops);
    dispatch_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
          if (out.dtype == DType::Bool) {
            compare_row<T, bool>(op, p[0], p[1], p[2], s[0], s[1], s[2], n);
          } else {
            compare_row<T, T>(op, p[0], p[1], p[2], s[0], s[1], s[2], n);
          }
        });
      }
    });
    return;
  }
  // Mixed dtypes: compute in the promoted input type.
  dispatch_dtype(binary_compute_dtype(op, out.dtype, a.dtype, b.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    if constexpr (!std::is_same_v<C, bool>) {
      mixed_loop<C, 3>(ops, [op](auto v) { return binary_value(op, v[0], v[1], C(1)); });
    }
  });
}

}  // namespace memgrad::kernels::cpu::detail
