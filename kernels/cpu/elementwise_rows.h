// The loops of the CPU elementwise kernels, shared by their files: unary.cpp (and clamp,
// where), unary_backward.cpp, binary.cpp and compare.cpp. Included by those files only.
//
// Three paths per op family, chosen per innermost row by LoopNest:
//   typed      every operand has the same dtype: a plain loop over T (vectorised by the
//              compiler when the row is contiguous or one input is broadcast along it);
//   eigen      contiguous float/double rows of transcendental ops use Eigen's vectorised
//              exp/log/tanh (unary.cpp; for the backward, the tanh GELU's float rows);
//   mixed      operands of different dtypes: each element is loaded and converted to the
//              compute type, then stored converted to the output's dtype (no temporaries).
// Float16 rows compute in float. The formulas themselves (and the compute-type rules) are
// kernels/elementwise_formulas.h, shared with the CUDA backend; these files hold the loops.
//
// Names in the loops, defined once here:
//   o, a, b      the current row of the output and of the inputs, as byte pointers (g: an
//                incoming gradient, sv: a saved tensor)
//   so, sa, sb   the byte stride from one element of that row to the next (0: broadcast)
//   es, er       the bytes of one element of the inputs' type T and of the output's type R
//   n            the elements of the row
//   T, R, C      the inputs' storage type, the output's, and the type computed in
//                (compute_t<T>: float for half, T otherwise)
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>

#include "kernels/cpu/element_types.h"
#include "kernels/cpu/strided_iter.h"
#include "kernels/kernel_args.h"

namespace memgrad::kernels::cpu::detail {

// out[i] = f(a[i]) with out and a of storage type T, computing in compute_t<T>.
template <typename T, typename F>
void map1(char* o, const char* a, int64_t so, int64_t sa, int64_t n, F f) {
  using C = compute_t<T>;
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  if (so == es && sa == es) {
    T* po = reinterpret_cast<T*>(o);
    const T* pa = reinterpret_cast<const T*>(a);
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(f(static_cast<C>(pa[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const C x = static_cast<C>(*reinterpret_cast<const T*>(a + i * sa));
    *reinterpret_cast<T*>(o + i * so) = static_cast<T>(f(x));
  }
}

// out[i] = f(a[i], b[i]), with fast paths for contiguous rows and a broadcast operand.
template <typename T, typename R, typename F>
void map2(char* o, const char* a, const char* b, int64_t so, int64_t sa, int64_t sb, int64_t n,
          F f) {
  using C = compute_t<T>;
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  constexpr auto er = static_cast<int64_t>(sizeof(R));
  R* po = reinterpret_cast<R*>(o);
  const T* pa = reinterpret_cast<const T*>(a);
  const T* pb = reinterpret_cast<const T*>(b);
  if (so == er && sa == es && sb == es) {
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(C(pa[i]), C(pb[i])));
  } else if (so == er && sa == es && sb == 0) {
    const C bv = C(*pb);
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(C(pa[i]), bv));
  } else if (so == er && sa == 0 && sb == es) {
    const C av = C(*pa);
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<R>(f(av, C(pb[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const C x = C(*reinterpret_cast<const T*>(a + i * sa));
      const C y = C(*reinterpret_cast<const T*>(b + i * sb));
      *reinterpret_cast<R*>(o + i * so) = static_cast<R>(f(x, y));
    }
  }
}

// ---- mixed-dtype loops: convert through the compute type C, a chunk of a row at a time ----
//
// Each input's chunk is converted into a buffer of C (the dtype switch outside the element
// loop), f computes the chunk, and the result is converted into the output's dtype. Converting
// element by element instead, with a dtype switch per operand inside the loop, stamps out one
// loop per combination of dtypes and ops: the binary kernels' file took a minute to compile.

constexpr int64_t kMixedChunk = 256;

// dst[i] = the i-th element of the strided row p (stride s bytes, dtype dt), as C.
template <typename C>
void gather_row(C* dst, const char* p, int64_t s, int64_t n, DType dt) {
  dispatch_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = convert_from<C>(*reinterpret_cast<const S*>(p + i * s));
  });
}

// The inverse: src[i] stored into the strided row p of dtype dt.
template <typename C>
void scatter_row(char* p, int64_t s, const C* src, int64_t n, DType dt) {
  dispatch_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<S*>(p + i * s) = convert_to<S>(src[i]);
  });
}

// ops[0] = f({ops[1][i], ..., ops[K-1][i]}) for operands of any dtypes.
template <typename C, size_t K, typename F>
void mixed_loop(const std::array<const Operand*, K>& ops, F f) {
  const LoopNest<K> nest = LoopNest<K>::make(ops);
  parallel_run(nest, base_pointers(ops),
               [&](std::array<char*, K> p, std::array<int64_t, K> s, int64_t n) {
                 std::array<std::array<C, kMixedChunk>, K> chunk;
                 for (int64_t start = 0; start < n; start += kMixedChunk) {
                   const int64_t m = std::min(kMixedChunk, n - start);
                   for (size_t k = 1; k < K; ++k) {
                     gather_row(chunk[k].data(), p[k] + start * s[k], s[k], m, ops[k]->dtype);
                   }
                   for (int64_t i = 0; i < m; ++i) {
                     std::array<C, K - 1> in;
                     for (size_t k = 1; k < K; ++k) in[k - 1] = chunk[k][i];
                     chunk[0][i] = f(in);
                   }
                   scatter_row(p[0] + start * s[0], s[0], chunk[0].data(), m, ops[0]->dtype);
                 }
               });
}

inline bool same_dtype(std::initializer_list<const Operand*> ops) {
  const DType d = (*ops.begin())->dtype;
  for (const Operand* op : ops) {
    if (op->dtype != d) return false;
  }
  return true;
}

// Comparisons (out = a OP b, a bool or a's dtype; compare.cpp): CpuBackend::binary hands them
// over, so the arithmetic rows are not stamped out for bool outputs.
void compare(BinaryOp op, const Operand& out, const Operand& a, const Operand& b);

}  // namespace memgrad::kernels::cpu::detail
