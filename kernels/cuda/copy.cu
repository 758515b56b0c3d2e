// CUDA fill and copy: strided, broadcasting, converting between any two dtypes, with the CPU's
// conversion rules (kernels/cpu/copy.cpp): through float when float16 is involved, through the
// wider of the two compute types otherwise, and x != 0 into bool.
//
// Paths: contiguous same-dtype copies are one cudaMemcpyAsync (device to device), a zero fill of
// a contiguous tensor is one cudaMemsetAsync; everything else is a grid-stride kernel over the
// Indexer (256-thread blocks), moving raw element bytes when the dtypes match and converting
// otherwise. Everything runs on the device's current stream and returns without waiting.
#include "kernels/cuda/cuda_backend.h"

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"

namespace memgrad::kernels::cuda {
namespace {

// An unsigned integer type of `bytes` bytes: elements of equal dtypes are moved as raw bits.
template <int kBytes>
struct RawOf;
template <>
struct RawOf<1> {
  using type = uint8_t;
};
template <>
struct RawOf<2> {
  using type = uint16_t;
};
template <>
struct RawOf<4> {
  using type = uint32_t;
};
template <>
struct RawOf<8> {
  using type = uint64_t;
};

// ---- kernels section ----

// Every element of `out` (any layout) = `bits`.
template <typename U>
__global__ void fill_kernel(Indexer<1> ix, char* out, int64_t n, U bits) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[1];
    ix.offsets(i, off);
    *reinterpret_cast<U*>(out + off[0]) = bits;
  }
}

// dst = src, elements of the same dtype moved as U-sized bits.
template <typename U>
__global__ void copy_same_kernel(Indexer<2> ix, char* dst, const char* src, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[2];
    ix.offsets(i, off);
    *reinterpret_cast<U*>(dst + off[0]) = *reinterpret_cast<const U*>(src + off[1]);
  }
}

// One element of S converted to T the way the CPU's convert_row does it.
template <typename T, typename S>
__device__ __forceinline__ void convert_one(char* o, const char* a) {
  constexpr bool kHalf = is_reduced_v<T> || is_reduced_v<S>;
  using C = std::conditional_t<kHalf, float, std::common_type_t<compute_t<T>, compute_t<S>>>;
  const C c = to_compute<C>(*reinterpret_cast<const S*>(a));
  if constexpr (std::is_same_v<T, bool>) {
    *reinterpret_cast<bool*>(o) = c != C(0);
  } else {
    *reinterpret_cast<T*>(o) = from_compute<T>(c);
  }
}

// dst (T) = src (S) for every element.
template <typename T, typename S>
__global__ void convert_kernel(Indexer<2> ix, char* dst, const char* src, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    int64_t off[2];
    ix.offsets(i, off);
    convert_one<T, S>(dst + off[0], src + off[1]);
  }
}

// ---- launchers section ----

template <int kBytes>
void launch_fill(int device, const Operand& out, uint64_t bits) {
  using U = typename RawOf<kBytes>::type;
  const int64_t n = out.numel();
  fill_kernel<U><<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device)>>>(
      make_indexer<1>({&out}), static_cast<char*>(out.data), n, static_cast<U>(bits));
  check_launch("fill_kernel", {&out});
}

template <int kBytes>
void launch_copy_same(int device, const Operand& dst, const Operand& src) {
  const int64_t n = dst.numel();
  copy_same_kernel<typename RawOf<kBytes>::type>
      <<<grid_for(n), kBlockThreads, 0, current_cuda_stream(device)>>>(
          make_indexer<2>({&dst, &src}), static_cast<char*>(dst.data),
          static_cast<const char*>(src.data), n);
  check_launch("copy_same_kernel", {&dst, &src});
}

void launch_convert(int device, const Operand& dst, const Operand& src) {
  const int64_t n = dst.numel();
  const Indexer<2> ix = make_indexer<2>({&dst, &src});
  cudaStream_t stream = current_cuda_stream(device);
  dispatch_storage(dst.dtype, [&](auto dtag) {
    using T = typename decltype(dtag)::type;
    dispatch_storage(src.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      convert_kernel<T, S><<<grid_for(n), kBlockThreads, 0, stream>>>(
          ix, static_cast<char*>(dst.data), static_cast<const char*>(src.data), n);
    });
  });
  check_launch("convert_kernel", {&dst, &src});
}

}  // namespace

void CudaBackend::fill(const Operand& out, double value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  const uint64_t bits = element_bits(out.dtype, value);
  const auto es = static_cast<int64_t>(element_size(out.dtype));
  const std::array<const Operand*, 1> ops = {&out};
  if (bits == 0 && all_contiguous<1>(make_indexer<1>(ops), ops)) {
    MEMGRAD_CUDA_CHECK(
        cudaMemsetAsync(out.data, 0, static_cast<size_t>(n * es), current_cuda_stream(device_)));
    return;
  }
  switch (es) {
    case 1: launch_fill<1>(device_, out, bits); return;
    case 2: launch_fill<2>(device_, out, bits); return;
    case 4: launch_fill<4>(device_, out, bits); return;
    default: launch_fill<8>(device_, out, bits); return;
  }
}

void CudaBackend::copy(const Operand& dst, const Operand& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(device_);
  if (dst.dtype != src.dtype) {
    launch_convert(device_, dst, src);
    return;
  }
  const std::array<const Operand*, 2> ops = {&dst, &src};
  const auto es = static_cast<int64_t>(element_size(dst.dtype));
  if (all_contiguous<2>(make_indexer<2>(ops), ops)) {
    MEMGRAD_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(n * es),
                                       cudaMemcpyDeviceToDevice, current_cuda_stream(device_)));
    return;
  }
  switch (es) {
    case 1: launch_copy_same<1>(device_, dst, src); return;
    case 2: launch_copy_same<2>(device_, dst, src); return;
    case 4: launch_copy_same<4>(device_, dst, src); return;
    default: launch_copy_same<8>(device_, dst, src); return;
  }
}

}  // namespace memgrad::kernels::cuda
