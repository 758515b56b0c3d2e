// fma_peak: the machine's fused multiply-add peak, measured, and the FLOPs of the benchmarks' MLP
// step, so a step's time can be set against the least it could take here (its FMA-peak bound).
//
// The peak is measured rather than computed from a data sheet: each of `threads` threads runs
// independent chains of fused multiply-adds on the widest vectors the build targets
// (-march=native): 16 chains of 64-byte AVX-512 vectors where the CPU has them, else 12 chains of
// 32-byte AVX2 vectors (with the two constants, 14 of AVX2's 16 vector registers: 16 chains of
// 64 bytes there would need 32 and spill to memory every iteration, measuring a tenth of the
// peak). Either is enough chains to cover the FMA latency of two FMA units on every x86 core
// measured. They run for about 100 ms after a warm-up. A FLOP is one multiply or one add, so an
// FMA on 16 floats is 32. The figure is what the cores sustain at the clock they hold under that
// load, the bound a GEMM could reach if it did nothing but FMAs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"

namespace bench {

namespace detail {

#ifdef __AVX512F__
inline constexpr int kVectorBytes = 64;
inline constexpr int kChains = 16;
#else
inline constexpr int kVectorBytes = 32;
inline constexpr int kChains = 12;
#endif
inline constexpr int kLanes = kVectorBytes / static_cast<int>(sizeof(float));
using Vector = float __attribute__((vector_size(kVectorBytes)));

// `iterations` x kChains chains x kLanes lanes x 2 FLOPs; returns a value that depends on every
// chain.
inline float fma_chains(int64_t iterations) {
  Vector acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = Vector{} + 1.0f + static_cast<float>(k) * 1e-3f;
  const Vector a = Vector{} + 0.999999f;
  const Vector b = Vector{} + 1e-7f;
  for (int64_t i = 0; i < iterations; ++i) {
    // One FMA each (-ffp-contract=fast); without -ffast-math the compiler may not fold them.
    for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * a + b;
  }
  float sum = 0.0f;
  for (int k = 0; k < kChains; ++k) {
    for (int lane = 0; lane < kLanes; ++lane) sum += acc[k][lane];
  }
  return sum;
}

inline constexpr double kFlopsPerIteration = 2.0 * kChains * kLanes;

}  // namespace detail

// GFLOP/s of fused multiply-adds on `threads` threads at once (10^9 FLOPs per second). Measured
// after a training run, it first lets that run's thread pools go idle: libgomp's workers keep
// spinning on a core for some milliseconds after a parallel region (its GOMP_SPINCOUNT), other
// runtimes up to 200 ms (KMP_BLOCKTIME), and a spinning worker took 15 to 35% of the peak
// measured right after the MLP's steps on a 2-core machine.
inline double measured_fma_peak_gflops(int threads) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  detail::fma_chains(1 << 20);  // warm-up: the clock settles under the vector load
  const int64_t iterations = int64_t{1} << 23;
  std::vector<std::thread> workers;
  std::vector<float> sink(static_cast<size_t>(threads));
  const Clock::time_point start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(
        [&sink, t, iterations] { sink[static_cast<size_t>(t)] = detail::fma_chains(iterations); });
  }
  for (std::thread& w : workers) w.join();
  const double seconds = seconds_since(start);
  volatile float keep = sink[0];
  (void)keep;
  return static_cast<double>(iterations) * detail::kFlopsPerIteration * threads / seconds / 1e9;
}

// The FLOPs of one training step of a stack of Linear layers with `widths` (inputs first) on a
// batch of `batch` rows: forward and the weights' gradients one GEMM each per layer, and the
// inputs' gradients for every layer but the first (the data needs none). 2 FLOPs per
// multiply-add; the elementwise passes (bias, activation, loss, optimizer) are not counted.
inline double linear_stack_step_flops(const std::vector<int64_t>& widths, int64_t batch) {
  double flops = 0.0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const double gemm = 2.0 * static_cast<double>(batch * widths[i] * widths[i + 1]);
    flops += (i == 0 ? 2.0 : 3.0) * gemm;
  }
  return flops;
}

// The FLOPs of one training step of a decoder-only transformer (train_charlm's CharLM) of
// `layers` blocks of width d = `width`, on `batch` sequences of `context` = T tokens over a
// vocabulary of V = `vocab`: per token, each block's projections (query, key, value and output:
// 4 d^2 multiply-adds) and MLP (d x 4d and back: 8 d^2), its attention (scores over all T
// positions, the causal mask applied to them, and the weighted sum: 2 T d), and the head (d V);
// backward takes two GEMMs of each (every input needs its gradient: the embeddings' flow through
// the first block). The elementwise passes (layer norms, GELU, softmax, AdamW) are not counted.
inline double transformer_step_flops(int64_t vocab, int64_t width, int64_t layers, int64_t context,
                                     int64_t batch) {
  const double d = static_cast<double>(width), t = static_cast<double>(context);
  const double per_token =
      static_cast<double>(layers) * (12.0 * d * d + 2.0 * t * d) + d * static_cast<double>(vocab);
  return 3.0 * 2.0 * static_cast<double>(batch * context) * per_token;
}

// Prints "<prefix>_step_gflop", "fma_peak" (measured on kThreads threads) and
// "<prefix>_step_fma_bound": the least time the step's `flops` take at that peak.
inline void report_fma_bound(const std::string& prefix, double flops) {
  const double peak = measured_fma_peak_gflops(kThreads);
  report((prefix + "_step_gflop").c_str(), flops / 1e9, "GFLOP");
  report("fma_peak", peak, "GFLOP/s");
  report((prefix + "_step_fma_bound").c_str(), flops / (peak * 1e9) * 1e3, "ms");
}

}  // namespace bench
