// CUDA index kernels: index_select, gather, scatter_add, index_add, masked_fill, one_hot.
//
// Bounds: every kernel that reads indices first runs index_check_kernel over all of them, which
// lowers a per-device word (atomicMin) to the first position (row-major) holding a value outside
// [0, size); the word is copied back and the stream synchronised. A bad index is returned as
// IndexCheck (with its value, read back from the index tensor) before anything is written, as
// on the CPU, so these calls wait for the device once. Negative indices are rejected.
//
// gather and scatter_add walk the index with an Indexer together with "restrided" operands (the
// index's sizes, stride 0 along `dim`), adding index x stride along `dim` (PyTorch's restride
// trick, kernels/operand_layout.h); index_select and index_add decompose the flat position into
// coordinates and replace the one along `dim`. Copies move raw element bytes; scatter_add and
// index_add accumulate with atomics (float16 with the sm_70+ __half atomicAdd, bfloat16 with
// sm_80+'s), so with duplicate indices the order of floating additions, and the rounding, can
// differ from run to run (as in PyTorch on CUDA). 256-thread blocks, grid-stride loops, on the
// current stream.
#include "kernels/cuda/cuda_backend.h"

#include <climits>

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/operand_layout.h"

namespace memgrad::kernels::cuda {
namespace {

// A tensor walked by coordinates, with the coordinate along `dim` replaced by an index value:
// index_select reads `src` at index[c] along dim; index_add writes `dst` at index[c].
struct SliceWalk {
  int ndim = 0;
  int dim = 0;
  int64_t sizes[kMaxDims] = {};          // of the walked operand
  int64_t walk_strides[kMaxDims] = {};   // bytes, of the walked operand
  int64_t other_strides[kMaxDims] = {};  // bytes, of the operand addressed through the index
  const int64_t* index = nullptr;
  int64_t index_stride = 0;  // elements (0 for a 0-d index)

  // Byte offsets of flat element i in the walked and in the indexed operand.
  __device__ void offsets(int64_t i, int64_t& walk, int64_t& other) const {
    walk = other = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = i % sizes[d];
      i /= sizes[d];
      walk += c * walk_strides[d];
      other += (d == dim ? index[c * index_stride] : c) * other_strides[d];
    }
  }
};

// ---- kernels section ----

// Lowers *first_bad to the first flat position whose value is outside [0, limit) (and is not
// `ignore` when use_ignore).
__global__ void index_check_kernel(Indexer<1> ix, const char* index, int64_t n, int64_t limit,
                                   bool use_ignore, int64_t ignore, unsigned long long* first_bad) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[1];
    ix.offsets(i, off);
    const int64_t v = *reinterpret_cast<const int64_t*>(index + off[0]);
    if ((v < 0 || v >= limit) && !(use_ignore && v == ignore)) {
      atomicMin(first_bad, static_cast<unsigned long long>(i));
    }
  }
}

template <typename U>
__global__ void index_select_kernel(SliceWalk w, char* out, const char* in, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t o, s;
    w.offsets(i, o, s);
    *reinterpret_cast<U*>(out + o) = *reinterpret_cast<const U*>(in + s);
  }
}

// Operands: 0 out, 1 index, 2 in restrided (stride 0 along dim); dim_bytes = in's stride there.
template <typename U>
__global__ void gather_kernel(Indexer<3> ix, char* out, const char* index, const char* in,
                              int64_t dim_bytes, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[3];
    ix.offsets(i, off);
    const int64_t idx = *reinterpret_cast<const int64_t*>(index + off[1]);
    *reinterpret_cast<U*>(out + off[0]) =
        *reinterpret_cast<const U*>(in + off[2] + idx * dim_bytes);
  }
}

// *p += v with an atomic of T's width (bool: logical or). `v` is in T's compute type, so an
// int64 addend arrives exact (through double, values above 2^53 would be rounded).
template <typename T>
__device__ __forceinline__ void atomic_add(T* p, compute_t<T> v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (v) *p = true;  // every writer stores the same value
  } else if constexpr (std::is_same_v<T, __half>) {
    atomicAdd(p, __float2half_rn(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    atomicAdd(p, __float2bfloat16_rn(v));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(p, v);
  }
}

// Operands: 0 self restrided, 1 index, 2 src restrided; dim_bytes = self's stride along dim.
template <typename T>
__global__ void scatter_add_kernel(Indexer<3> ix, char* self, const char* index, const char* src,
                                   DType src_dtype, int64_t dim_bytes, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[3];
    ix.offsets(i, off);
    const int64_t idx = *reinterpret_cast<const int64_t*>(index + off[1]);
    atomic_add(reinterpret_cast<T*>(self + off[0] + idx * dim_bytes),
               load_as<compute_t<T>>(src + off[2], src_dtype));
  }
}

// Walks src; self is addressed through the index along dim.
template <typename T>
__global__ void index_add_kernel(SliceWalk w, char* self, const char* src, DType src_dtype,
                                 int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t s, o;
    w.offsets(i, s, o);
    atomic_add(reinterpret_cast<T*>(self + o), load_as<compute_t<T>>(src + s, src_dtype));
  }
}

template <typename U>
__global__ void masked_fill_kernel(Indexer<2> ix, char* self, const char* mask, U bits, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[2];
    ix.offsets(i, off);
    if (*reinterpret_cast<const bool*>(mask + off[1])) *reinterpret_cast<U*>(self + off[0]) = bits;
  }
}

// Operands: 0 out without its class dim (the labels' sizes), 1 labels.
__global__ void one_hot_kernel(Indexer<2> ix, char* out, const char* labels, DType out_dtype,
                               int64_t class_bytes, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[2];
    ix.offsets(i, off);
    const int64_t label = *reinterpret_cast<const int64_t*>(labels + off[1]);
    store_as<int64_t>(out + off[0] + label * class_bytes, out_dtype, 1);
  }
}

// ---- launchers section ----

int64_t esize(DType d) { return static_cast<int64_t>(element_size(d)); }

// Walks `walked`; `other` is addressed with index[c] along dim (its strides in bytes).
SliceWalk make_walk(const Operand& walked, const Operand& other, const Operand& index, int dim) {
  SliceWalk w;
  w.ndim = walked.ndim;
  w.dim = dim;
  for (int d = 0; d < walked.ndim; ++d) {
    w.sizes[d] = walked.sizes[d];
    w.walk_strides[d] = walked.strides[d] * esize(walked.dtype);
    w.other_strides[d] = other.strides[d] * esize(other.dtype);
  }
  w.index = static_cast<const int64_t*>(index.data);
  w.index_stride = index.ndim == 0 ? 0 : index.strides[0];
  return w;
}

// Calls fn(Tag<U>{}) with U an unsigned type of dtype's element size.
template <typename Fn>
void dispatch_bytes(DType dtype, Fn&& fn) {
  switch (element_size(dtype)) {
    case 1: fn(Tag<uint8_t>{}); return;
    case 2: fn(Tag<uint16_t>{}); return;
    case 4: fn(Tag<uint32_t>{}); return;
    default: fn(Tag<uint64_t>{}); return;
  }
}

}  // namespace

IndexCheck check_index_range(int device, const Operand& index, int64_t limit,
                             const int64_t* ignore) {
  const int64_t n = index.numel();
  if (n == 0) return {};
  cudaStream_t stream = current_cuda_stream(device);
  IndexCheckWord w = index_check_word(device);
  MEMGRAD_CUDA_CHECK(cudaMemsetAsync(w.word, 0xff, sizeof(unsigned long long), stream));
  index_check_kernel<<<grid_for(n), kBlockThreads, 0, stream>>>(
      make_indexer<1>({&index}), static_cast<const char*>(index.data), n, limit, ignore != nullptr,
      ignore != nullptr ? *ignore : 0, w.word);
  check_launch("index_check_kernel", {&index});
  unsigned long long first = 0;
  MEMGRAD_CUDA_CHECK(cudaMemcpyAsync(&first, w.word, sizeof first, cudaMemcpyDeviceToHost, stream));
  MEMGRAD_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (first == ULLONG_MAX) return {};
  const auto position = static_cast<int64_t>(first);
  int64_t value = 0;
  const auto* at = static_cast<const int64_t*>(index.data) + element_offset(index, position);
  MEMGRAD_CUDA_CHECK(cudaMemcpyAsync(&value, at, sizeof value, cudaMemcpyDeviceToHost, stream));
  MEMGRAD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return IndexCheck{false, value, position};
}

// ---- entry points ----

IndexCheck CudaBackend::index_select(const Operand& out, const Operand& in, const Operand& index,
                                     int dim) {
  DeviceGuard guard(device_);
  const IndexCheck check = check_index_range(device_, index, in.sizes[dim]);
  const int64_t n = out.numel();
  if (!check.ok || n == 0) return check;
  const SliceWalk w = make_walk(out, in, index, dim);
  dispatch_bytes(out.dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    index_select_kernel<U><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        w, static_cast<char*>(out.data), static_cast<const char*>(in.data), n);
  });
  check_launch("index_select_kernel", {&out, &in, &index});
  return check;
}

IndexCheck CudaBackend::gather(const Operand& out, const Operand& in, const Operand& index,
                               int dim) {
  DeviceGuard guard(device_);
  const IndexCheck check = check_index_range(device_, index, in.sizes[dim]);
  const int64_t n = index.numel();
  if (!check.ok || n == 0) return check;
  const Operand src = restrided(in, index, dim);
  const Indexer<3> ix = make_indexer<3>({&out, &index, &src});
  const int64_t dim_bytes = in.strides[dim] * esize(in.dtype);
  dispatch_bytes(out.dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    gather_kernel<U><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        ix, static_cast<char*>(out.data), static_cast<const char*>(index.data),
        static_cast<const char*>(in.data), dim_bytes, n);
  });
  check_launch("gather_kernel", {&out, &in, &index});
  return check;
}

IndexCheck CudaBackend::scatter_add(const Operand& self, const Operand& index, const Operand& src,
                                    int dim) {
  DeviceGuard guard(device_);
  const IndexCheck check = check_index_range(device_, index, self.sizes[dim]);
  const int64_t n = index.numel();
  if (!check.ok || n == 0) return check;
  const Operand dst = restrided(self, index, dim);
  const Operand from = restrided(src, index, -1);
  const Indexer<3> ix = make_indexer<3>({&dst, &index, &from});
  const int64_t dim_bytes = self.strides[dim] * esize(self.dtype);
  dispatch_storage(self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_add_kernel<T><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        ix, static_cast<char*>(self.data), static_cast<const char*>(index.data),
        static_cast<const char*>(src.data), src.dtype, dim_bytes, n);
  });
  check_launch("scatter_add_kernel", {&self, &index, &src});
  return check;
}

IndexCheck CudaBackend::index_add(const Operand& self, const Operand& index, const Operand& src,
                                  int dim) {
  DeviceGuard guard(device_);
  const IndexCheck check = check_index_range(device_, index, self.sizes[dim]);
  const int64_t n = src.numel();
  if (!check.ok || n == 0) return check;
  const SliceWalk w = make_walk(src, self, index, dim);
  dispatch_storage(self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_kernel<T><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        w, static_cast<char*>(self.data), static_cast<const char*>(src.data), src.dtype, n);
  });
  check_launch("index_add_kernel", {&self, &index, &src});
  return check;
}

void CudaBackend::masked_fill(const Operand& self, const Operand& mask, double value) {
  const int64_t n = self.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  const Indexer<2> ix = make_indexer<2>({&self, &mask});
  const uint64_t bits = element_bits(self.dtype, value);
  dispatch_bytes(self.dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    masked_fill_kernel<U><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
        ix, static_cast<char*>(self.data), static_cast<const char*>(mask.data),
        static_cast<U>(bits), n);
  });
  check_launch("masked_fill_kernel", {&self, &mask});
}

IndexCheck CudaBackend::one_hot(const Operand& out, const Operand& labels) {
  DeviceGuard guard(device_);
  const int last = out.ndim - 1;
  const IndexCheck check = check_index_range(device_, labels, out.sizes[last]);
  if (!check.ok) return check;
  fill(out, 0.0);
  const int64_t n = labels.numel();
  if (n == 0) return check;
  const Operand rows = restrided(out, labels, -1);
  one_hot_kernel<<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device_)>>>(
      make_indexer<2>({&rows, &labels}), static_cast<char*>(out.data),
      static_cast<const char*>(labels.data), out.dtype, out.strides[last] * esize(out.dtype), n);
  check_launch("one_hot_kernel", {&out, &labels});
  return check;
}

}  // namespace memgrad::kernels::cuda
