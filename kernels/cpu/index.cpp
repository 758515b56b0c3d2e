// CPU index kernels: index_select, gather, scatter_add, index_add, masked_fill, one_hot.
//
// Every kernel that reads indices scans them all first and returns the first one outside
// [0, size) (IndexCheck, position in row-major order) before writing anything, so a bad index
// leaves the output untouched. Negative indices are rejected, as PyTorch's index_select, gather
// and scatter do.
//
// gather and scatter_add walk the index with LoopNest together with a "restrided" operand of
// the indexed tensor: the index's sizes with stride 0 along `dim`, so the walker yields the
// start of each line along `dim` and the index value adds the offset (PyTorch's restride
// trick, kernels/operand_layout.h). index_select and index_add take a 0-d or 1-d index and copy
// or add whole slices.
// scatter_add and index_add run serially: duplicate indices accumulate in index order.
#include "kernels/cpu/cpu_backend.h"

#include <omp.h>

#include <cstring>

#include "kernels/cpu/element_types.h"
#include "kernels/cpu/strided_iter.h"
#include "kernels/operand_layout.h"

namespace memgrad::kernels::cpu {
namespace {

int64_t esize(DType d) { return static_cast<int64_t>(element_size(d)); }

// `t` without dimension `dim`, starting at position `pos` along it.
Operand slice_at(const Operand& t, int dim, int64_t pos) {
  Operand s;
  s.data = static_cast<char*>(t.data) + pos * t.strides[dim] * esize(t.dtype);
  s.dtype = t.dtype;
  for (int d = 0; d < t.ndim; ++d) {
    if (d == dim) continue;
    s.sizes[s.ndim] = t.sizes[d];
    s.strides[s.ndim] = t.strides[d];
    ++s.ndim;
  }
  return s;
}

// The first index (row-major) outside [0, limit), or ok.
IndexCheck check_range(const Operand& index, int64_t limit) {
  const std::array<const Operand*, 1> ops = {&index};
  const LoopNest<1> nest = LoopNest<1>::make(ops);
  IndexCheck result;
  int64_t position = 0;
  nest.run(base_pointers(ops), 0, nest.numel, [&](auto p, auto s, int64_t n) {
    if (!result.ok) return;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = *reinterpret_cast<const int64_t*>(p[0] + i * s[0]);
      if (v < 0 || v >= limit) {
        result = IndexCheck{false, v, position + i};
        return;
      }
    }
    position += n;
  });
  return result;
}

// Element i of a 0-d or 1-d int64 index.
int64_t index_at(const Operand& index, int64_t i) {
  const int64_t stride = index.ndim == 0 ? 0 : index.strides[0];
  return static_cast<const int64_t*>(index.data)[i * stride];
}

// dst += src for one element of type T (float16 and bfloat16 add in float, bool is logical
// or).
template <typename T>
void add_into(char* dst, const char* src) {
  T& d = *reinterpret_cast<T*>(dst);
  const T s = *reinterpret_cast<const T*>(src);
  if constexpr (std::is_same_v<T, bool>) {
    d = d || s;
  } else if constexpr (is_reduced_v<T>) {
    d = T(static_cast<float>(d) + static_cast<float>(s));
  } else {
    d = static_cast<T>(d + s);
  }
}

}  // namespace

IndexCheck CpuBackend::index_select(const Operand& out, const Operand& in, const Operand& index,
                                    int dim) {
  const IndexCheck check = check_range(index, in.sizes[dim]);
  if (!check.ok) return check;
  const int64_t n = index.numel();
  // Many small slices (an embedding lookup): one thread per group of slices; few large ones:
  // the copy kernel spreads each slice.
  const bool parallel = n > 1 && out.numel() >= kParallelThreshold && !omp_in_parallel();
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    copy(slice_at(out, dim, i), slice_at(in, dim, index_at(index, i)));
  }
  return check;
}

IndexCheck CpuBackend::gather(const Operand& out, const Operand& in, const Operand& index,
                              int dim) {
  const IndexCheck check = check_range(index, in.sizes[dim]);
  if (!check.ok) return check;
  const Operand src = restrided(in, index, dim);
  const int64_t dim_bytes = in.strides[dim] * esize(in.dtype);
  const std::array<const Operand*, 3> ops = {&out, &index, &src};
  const LoopNest<3> nest = LoopNest<3>::make(ops);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t idx = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            *reinterpret_cast<const T*>(p[2] + i * s[2] + idx * dim_bytes);
      }
    });
  });
  return check;
}

IndexCheck CpuBackend::scatter_add(const Operand& self, const Operand& index, const Operand& src,
                                   int dim) {
  const IndexCheck check = check_range(index, self.sizes[dim]);
  if (!check.ok) return check;
  const Operand dst = restrided(self, index, dim);
  const Operand from = restrided(src, index, -1);
  const int64_t dim_bytes = self.strides[dim] * esize(self.dtype);
  const std::array<const Operand*, 3> ops = {&dst, &index, &from};
  const LoopNest<3> nest = LoopNest<3>::make(ops);
  dispatch_dtype(self.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Serial: two index entries may name the same element of self.
    nest.run(base_pointers(ops), 0, nest.numel, [&](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t idx = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
        add_into<T>(p[0] + i * s[0] + idx * dim_bytes, p[2] + i * s[2]);
      }
    });
  });
  return check;
}

IndexCheck CpuBackend::index_add(const Operand& self, const Operand& index, const Operand& src,
                                 int dim) {
  const IndexCheck check = check_range(index, self.sizes[dim]);
  if (!check.ok) return check;
  const int64_t n = index.numel();
  for (int64_t i = 0; i < n; ++i) {
    const Operand dst = slice_at(self, dim, index_at(index, i));
    binary(BinaryOp::Add, dst, dst, slice_at(src, dim, i), 1.0);
  }
  return check;
}

void CpuBackend::masked_fill(const Operand& self, const Operand& mask, double value) {
  const std::array<const Operand*, 2> ops = {&self, &mask};
  const LoopNest<2> nest = LoopNest<2>::make(ops);
  dispatch_dtype(self.dtype, [&](auto tag) {
    using T = decltype(tag);
    char v[sizeof(T)];
    store_as<double>(v, self.dtype, value);
    T fill;
    std::memcpy(&fill, v, sizeof(T));
    parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
      if (s[0] == static_cast<int64_t>(sizeof(T)) && s[1] == 1) {
        // Contiguous rows (attention's causal mask): a select the compiler vectorises.
        T* __restrict out = reinterpret_cast<T*>(p[0]);
        const auto* __restrict m = reinterpret_cast<const uint8_t*>(p[1]);
        const T f = fill;
        for (int64_t i = 0; i < n; ++i) {
          const T o = out[i];
          out[i] = m[i] != 0 ? f : o;
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        if (*reinterpret_cast<const bool*>(p[1] + i * s[1])) {
          std::memcpy(p[0] + i * s[0], v, sizeof(T));
        }
      }
    });
  });
}

IndexCheck CpuBackend::one_hot(const Operand& out, const Operand& labels) {
  const int last = out.ndim - 1;
  const IndexCheck check = check_range(labels, out.sizes[last]);
  if (!check.ok) return check;
  fill(out, 0.0);
  // out without its class dim, walked together with the labels.
  Operand rows = restrided(out, labels, -1);
  const int64_t class_bytes = out.strides[last] * esize(out.dtype);
  const std::array<const Operand*, 2> ops = {&rows, &labels};
  const LoopNest<2> nest = LoopNest<2>::make(ops);
  parallel_run(nest, base_pointers(ops), [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
      store_as<int64_t>(p[0] + i * s[0] + label * class_bytes, out.dtype, 1);
    }
  });
  return check;
}

}  // namespace memgrad::kernels::cpu
