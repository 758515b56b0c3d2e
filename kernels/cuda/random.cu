// CUDA random fills with the CPU backend's values (kernels/cpu/random.cpp). Element i of a
// contiguous output uses Philox-4x32-10 counter offset + i / 4 and word i % 4 (kernels/philox.h);
// the draws are kernels/random_formulas.h, the text the CPU runs too.
//
// One thread per Philox block of four elements, grid-stride, 256-thread blocks, current stream.
// uniform, randint and bernoulli are bit-identical to the CPU. normal also calls log, sin and
// cos, whose CUDA versions may differ from glibc's in the last bit of a double (up to 2 ulp), so
// its values agree to about 1e-15 relative in float64 and almost always exactly once rounded to
// float32.
#include "kernels/cuda/cuda_backend.h"

#include "allocator/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/random_formulas.h"

namespace memgrad::kernels::cuda {
namespace {

enum class Draw : uint8_t { Uniform, Normal, Randint, Bernoulli };

// What one draw needs besides the Philox words: from/to, mean/std, low/range, p.
struct DrawArgs {
  double a = 0.0, b = 0.0;  // uniform: from, to - from; normal: mean, std; bernoulli: p
  int64_t low = 0;
  uint64_t range = 1;
};

// ---- kernels section ----

// The CPU's store<T>(double): float16 and bfloat16 through float, bool as v != 0.
template <typename T>
__device__ __forceinline__ void store_double(T* out, int64_t i, double v) {
  if constexpr (std::is_same_v<T, __half>) {
    out[i] = __float2half_rn(__double2float_rn(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    out[i] = __float2bfloat16_rn(__double2float_rn(v));
  } else if constexpr (std::is_same_v<T, float>) {
    out[i] = __double2float_rn(v);
  } else {
    out[i] = static_cast<T>(v);
  }
}

template <Draw D, typename T>
__device__ __forceinline__ double draw_value(const Philox4& r, int j, const DrawArgs& args) {
  if constexpr (D == Draw::Uniform) {
    return uniform_draw(r.w[j],
                        uniform_bits(std::is_same_v<T, double>, std::is_same_v<T, __half>,
                                     std::is_same_v<T, __nv_bfloat16>),
                        args.a, args.b);
  } else if constexpr (D == Draw::Normal) {
    return normal_draw(r, j, args.a, args.b);
  } else if constexpr (D == Draw::Randint) {
    return randint_draw(r.w[j], args.low, args.range);
  } else {
    return bernoulli_draw(r.w[j], args.a);
  }
}

template <Draw D, typename T>
__global__ void random_kernel(T* out, int64_t numel, uint64_t seed, uint64_t offset,
                              DrawArgs args) {
  const int64_t blocks = (numel + 3) / 4;
  for (int64_t b = thread_index(); b < blocks; b += grid_stride()) {
    const Philox4 r = philox4x32(seed, offset + static_cast<uint64_t>(b));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (b * 4 + j < numel) store_double(out, b * 4 + j, draw_value<D, T>(r, j, args));
    }
  }
}

// ---- launchers section ----

template <Draw D>
void launch_random(int device, const char* name, const Operand& out, uint64_t seed, uint64_t offset,
                   const DrawArgs& args) {
  const int64_t numel = out.numel();
  if (numel == 0) return;
  DeviceGuard guard(device);
  cudaStream_t stream = current_cuda_stream(device);
  const unsigned grid = grid_for((numel + 3) / 4);
  dispatch_storage(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<D, T>
        <<<grid, kBlockThreads, 0, stream>>>(static_cast<T*>(out.data), numel, seed, offset, args);
  });
  check_launch(name, {&out});
}

}  // namespace

// ---- entry points (the output is contiguous: element i at data + i) ----

void CudaBackend::uniform(const Operand& out, uint64_t seed, uint64_t offset, double from,
                          double to) {
  DrawArgs args;
  args.a = from;
  args.b = to - from;
  launch_random<Draw::Uniform>(device_, "uniform_kernel", out, seed, offset, args);
}

void CudaBackend::normal(const Operand& out, uint64_t seed, uint64_t offset, double mean,
                         double std) {
  DrawArgs args;
  args.a = mean;
  args.b = std;
  launch_random<Draw::Normal>(device_, "normal_kernel", out, seed, offset, args);
}

void CudaBackend::randint(const Operand& out, uint64_t seed, uint64_t offset, int64_t low,
                          int64_t high) {
  DrawArgs args;
  args.low = low;
  args.range = static_cast<uint64_t>(high - low);
  launch_random<Draw::Randint>(device_, "randint_kernel", out, seed, offset, args);
}

void CudaBackend::bernoulli(const Operand& out, uint64_t seed, uint64_t offset, double p) {
  DrawArgs args;
  args.a = p;
  launch_random<Draw::Bernoulli>(device_, "bernoulli_kernel", out, seed, offset, args);
}

}  // namespace memgrad::kernels::cuda
