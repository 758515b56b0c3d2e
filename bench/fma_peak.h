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
// between a training run's steps, it first lets that run's thread pools go idle: libgomp's
// workers keep spinning on a core for some milliseconds after a parallel region (its
// GOMP_SPINCOUNT), other runtimes up to 200 ms (KMP_BLOCKTIME), and a spinning worker took 15 to
// 35% of the peak measured right after the MLP's steps on a 2-core machine.
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

// A training benchmark's step times and the FMA peak measured while they were taken.
struct StepsAndPeak {
  std::vector<double> step_ms;
  std::vector<double> peak_gflops;  // one measurement after each block of timed steps
};

// time_training_steps with the FMA peak of kThreads threads measured after each of its
// kStepBlocks blocks, so the peak is sampled over the same minutes, under the same load from
// whatever else shares the machine, as the steps it bounds. On a shared 2-vCPU machine,
// back-to-back measurements of 4 ms each ranged from 70 to 200 GFLOP/s within seconds while
// nothing else of ours ran: one measurement after the run (what this replaces) set a median of
// 200 steps against whichever value that moment gave.
template <typename Step>
StepsAndPeak time_training_steps_and_peak(const Flags& flags, Step&& step) {
  StepsAndPeak out;
  out.step_ms = time_training_steps(
      flags, step, [&] { out.peak_gflops.push_back(measured_fma_peak_gflops(kThreads)); });
  return out;
}

// Prints "<prefix>_step_gflop", "fma_peak" (the median of `peak_gflops`, measured on kThreads
// threads between the steps) and "<prefix>_step_fma_bound": the least time the step's `flops`
// take at that peak.
inline void report_fma_bound(const std::string& prefix, double flops,
                             const std::vector<double>& peak_gflops) {
  const double peak = median(peak_gflops);
  report((prefix + "_step_gflop").c_str(), flops / 1e9, "GFLOP");
  report("fma_peak", peak, "GFLOP/s");
  report((prefix + "_step_fma_bound").c_str(), flops / (peak * 1e9) * 1e3, "ms");
}

}  // namespace bench
