// CPU fill and copy: strided, broadcasting, converting between any two dtypes.
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/element_types.h"
#include "kernels/cpu/strided_iter.h"

namespace memgrad::kernels::cpu {
namespace {

template <typename T>
void fill_row(char* o, int64_t so, int64_t n, T v) {
  if (so == static_cast<int64_t>(sizeof(T))) {
    T* p = reinterpret_cast<T*>(o);
    for (int64_t i = 0; i < n; ++i) p[i] = v;
    return;
  }
  for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(o + i * so) = v;
}

template <typename T>
void copy_row(char* o, const char* a, int64_t so, int64_t sa, int64_t n) {
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  if (so == es && sa == es) {
    std::memcpy(o, a, static_cast<size_t>(n * es));
    return;
  }
  if (so == es && sa == 0) return fill_row<T>(o, so, n, *reinterpret_cast<const T*>(a));
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<T*>(o + i * so) = *reinterpret_cast<const T*>(a + i * sa);
  }
}

// dst (T) = src (S), converting through float for half and bfloat16 and through the wider type
// otherwise.
template <typename T, typename S>
void convert_row(char* o, const char* a, int64_t so, int64_t sa, int64_t n) {
  using C = std::conditional_t<is_reduced_v<T> || is_reduced_v<S>, float,
                               std::common_type_t<compute_t<T>, compute_t<S>>>;
  for (int64_t i = 0; i < n; ++i) {
    const S v = *reinterpret_cast<const S*>(a + i * sa);
    C c;
    if constexpr (is_reduced_v<S>) {
      c = static_cast<C>(static_cast<float>(v));
    } else {
      c = static_cast<C>(v);
    }
    if constexpr (std::is_same_v<T, bool>) {
      *reinterpret_cast<T*>(o + i * so) = c != C(0);
    } else if constexpr (is_reduced_v<T>) {
      *reinterpret_cast<T*>(o + i * so) = T(static_cast<float>(c));
    } else {
      *reinterpret_cast<T*>(o + i * so) = cast_to<T>(c);
    }
  }
}

}  // namespace

void CpuBackend::fill(const Operand& out, double value) {
  const std::array<const Operand*, 1> ops = {&out};
  const LoopNest<1> nest = LoopNest<1>::make(ops);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (is_reduced_v<T>) {
      v = T(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, bool>) {
      v = value != 0.0;
    } else {
      v = cast_to<T>(value);
    }
    parallel_run(nest, base_pointers(ops),
                 [&](auto p, auto s, int64_t n) { fill_row<T>(p[0], s[0], n, v); });
  });
}

void CpuBackend::copy(const Operand& dst, const Operand& src) {
  const std::array<const Operand*, 2> ops = {&dst, &src};
  const LoopNest<2> nest = LoopNest<2>::make(ops);
  dispatch_dtype(dst.dtype, [&](auto dtag) {
    using T = decltype(dtag);
    dispatch_dtype(src.dtype, [&](auto stag) {
      using S = decltype(stag);
      parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
        if constexpr (std::is_same_v<T, S>) {
          copy_row<T>(p[0], p[1], s[0], s[1], n);
        } else {
          convert_row<T, S>(p[0], p[1], s[0], s[1], n);
        }
      });
    });
  });
}

}  // namespace memgrad::kernels::cpu
