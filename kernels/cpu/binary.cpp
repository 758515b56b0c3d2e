// CPU binary arithmetic kernels: add, sub, mul, div, pow, maximum, minimum, with a tensor or a
// scalar operand (comparisons are compare.cpp's). The loops and the names they use:
// kernels/cpu/elementwise_rows.h.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise_rows.h"
#include "kernels/elementwise_formulas.h"

namespace memgrad::kernels::cpu {
namespace {

using detail::map2;
using detail::mixed_loop;

// out = a OP b for an arithmetic op, all three of type T.
template <typename T>
void binary_row(BinaryOp op, char* o, const char* a, const char* b, int64_t so, int64_t sa,
                int64_t sb, int64_t n, double alpha) {
  using C = compute_t<T>;
  const C al = static_cast<C>(alpha);
  switch (op) {
    // alpha = 1 gets its own loop: x + 1 y folds to x + y, which vectorises best.
    case BinaryOp::Add:
      if (alpha == 1.0) {
        return map2<T, T>(o, a, b, so, sa, sb, n, [](C x, C y) { return add_value(x, y, C(1)); });
      }
      return map2<T, T>(o, a, b, so, sa, sb, n, [al](C x, C y) { return add_value(x, y, al); });
    case BinaryOp::Sub:
      if (alpha == 1.0) {
        return map2<T, T>(o, a, b, so, sa, sb, n, [](C x, C y) { return sub_value(x, y, C(1)); });
      }
      return map2<T, T>(o, a, b, so, sa, sb, n, [al](C x, C y) { return sub_value(x, y, al); });
    case BinaryOp::Mul:
      return map2<T, T>(o, a, b, so, sa, sb, n, [](C x, C y) { return mul_rn(x, y); });
    default:
      return map2<T, T>(o, a, b, so, sa, sb, n,
                        [op, al](C x, C y) { return binary_value(op, x, y, al); });
  }
}

}  // namespace

void CpuBackend::binary(BinaryOp op, const Operand& out, const Operand& a, const Operand& b,
                        double alpha) {
  if (is_comparison(op)) return detail::compare(op, out, a, b);
  const std::array<const Operand*, 3> ops = {&out, &a, &b};
  if (a.dtype == b.dtype && a.dtype != DType::Bool && out.dtype == a.dtype) {
    const LoopNest<3> nest = LoopNest<3>::make(ops);
    dispatch_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
          binary_row<T>(op, p[0], p[1], p[2], s[0], s[1], s[2], n, alpha);
        });
      }
    });
    return;
  }
  // Mixed dtypes: compute in the output's type.
  dispatch_dtype(binary_compute_dtype(op, out.dtype, a.dtype, b.dtype), [&](auto tag) {
    using C = compute_t<decltype(tag)>;
    if constexpr (!std::is_same_v<C, bool>) {
      const C al = static_cast<C>(alpha);
      mixed_loop<C, 3>(ops, [op, al](auto v) { return binary_value(op, v[0], v[1], al); });
    }
  });
}

void CpuBackend::binary_scalar(BinaryOp op, const Operand& out, const Operand& a, double scalar,
                               bool scalar_first) {
  // The scalar becomes a host operand broadcast with stride 0, in the dtype
  // scalar_operand_dtype picks (a's dtype when it fits exactly, so the typed paths apply).
  union {
    float f;
    double d;
    int64_t i;
  } value{};
  Operand s;
  s.data = &value;
  s.ndim = out.ndim;
  for (int d = 0; d < out.ndim; ++d) s.sizes[d] = out.sizes[d];
  s.dtype = scalar_operand_dtype(a.dtype, scalar);
  switch (s.dtype) {
    case DType::Float32: value.f = static_cast<float>(scalar); break;
    case DType::Int64: value.i = static_cast<int64_t>(scalar); break;
    default: value.d = scalar; break;
  }
  if (scalar_first) {
    binary(op, out, s, a, 1.0);
  } else {
    binary(op, out, a, s, 1.0);
  }
}

}  // namespace memgrad::kernels::cpu
