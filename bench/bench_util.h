// bench_util: timing, reporting and environment helpers shared by the benchmark programs and
// their libtorch peers (bench/peer/). Header-only and free of memgrad and libtorch headers, so a
// memgrad benchmark and its peer time, count and print in exactly the same way.
//
// Output contract (parsed by tools/run_bench.py): one measurement per line,
//   name: value unit        e.g. "add_1elem_overhead: 412.3 ns/op", "train_peak_allocated: n/a MiB"
// with the same names in a benchmark and its peer; lines starting with "config:" describe the
// run (BLAS core, threads, malloc tunables) and are shown, not compared.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

// Threads for every benchmark and peer (the development machines have 2 cores).
inline constexpr int kThreads = 2;

// Seconds since `start`.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The median of `values` (the upper one of the middle pair for an even count); 0 when empty.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The q-quantile (0..1) of `values`, nearest rank; 0 when empty.
inline double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto last = static_cast<double>(values.size() - 1);
  return values[static_cast<size_t>(std::lround(q * last))];
}

// Median over `loops` runs of the mean seconds per call of `op`, called `calls` times per run,
// after one untimed run of the same length (the warm-up).
template <typename Op>
double median_seconds_per_call(Op&& op, int loops, int calls) {
  std::vector<double> runs;
  for (int r = 0; r <= loops; ++r) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i) op();
    const double per_call = seconds_since(start) / calls;
    if (r > 0) runs.push_back(per_call);
  }
  return median(runs);
}

// Prints one measurement line: "name: value unit".
inline void report(const char* name, double value, const char* unit) {
  std::printf("%s: %.4g %s\n", name, value, unit);
  std::fflush(stdout);
}

// Prints a measurement this implementation cannot make: "name: n/a unit".
inline void report_missing(const char* name, const char* unit) {
  std::printf("%s: n/a %s\n", name, unit);
  std::fflush(stdout);
}

// Resident set size of this process now, in MiB (/proc/self/statm counts pages); 0 if unknown.
inline double current_rss_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0.0;
  long pages = 0, resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
                         (1024.0 * 1024.0)
                   : 0.0;
}

// Peak resident set size of this process so far, in MiB: the kernel's VmHWM
// (/proc/self/status). Not getrusage's ru_maxrss, which a process keeps across exec: a program
// started by a Python runner would report the runner's 13 MiB as its own peak at startup.
inline double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0.0;
}

// The BLAS this process loaded, looked up at run time (dlsym) so the caller needs no BLAS headers:
// "OpenBLAS <config>, core <name>, <threading>"; "MKL <version>" for PyTorch 2.x's libtorch from
// PyPI, which links Intel's MKL into libtorch_cpu.so; "no OpenBLAS or MKL loaded" otherwise.
inline std::string blas_description() {
  using StringFn = char* (*)();
  using IntFn = int (*)();
  using MklVersionFn = void (*)(char*, int);
  const auto config = reinterpret_cast<StringFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const auto core = reinterpret_cast<StringFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const auto parallel = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (config == nullptr || core == nullptr) {
    const auto mkl = reinterpret_cast<MklVersionFn>(dlsym(RTLD_DEFAULT, "MKL_Get_Version_String"));
    if (mkl == nullptr) return "no OpenBLAS or MKL loaded";
    char version[256] = {};
    mkl(version, sizeof version);
    return std::string("MKL ") + version;
  }
  const int mode = parallel != nullptr ? parallel() : -1;
  const char* threading = mode == 0   ? "sequential"
                          : mode == 1 ? "pthreads"
                          : mode == 2 ? "openmp"
                                      : "?";
  return std::string(config()) + ", core " + core() + ", " + threading;
}

// The value of environment variable `name`, or "(unset)".
inline std::string env_or_unset(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "(unset)";
}

// Prints the "config:" lines every benchmark starts with: who runs, BLAS, threads, tunables.
inline void print_config(const char* implementation, int threads) {
  std::printf("config: %s, %d threads\n", implementation, threads);
  std::printf("config: BLAS %s\n", blas_description().c_str());
  std::printf("config: OPENBLAS_CORETYPE=%s GLIBC_TUNABLES=%s\n",
              env_or_unset("OPENBLAS_CORETYPE").c_str(), env_or_unset("GLIBC_TUNABLES").c_str());
  std::fflush(stdout);
}

// Command-line flags common to every benchmark and peer.
struct Flags {
  bool quick = false;        // --quick: fewer iterations (a demo; noisier)
  bool config_only = false;  // --config: print the "config:" lines and exit
};

// Parses [--quick] [--config] [--help]. Returns the exit status when the program should stop
// here (help: 0, a bad flag: 2, after printing usage), or -1 to go on.
inline int parse_flags(int argc, char** argv, const char* program, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      flags.quick = true;
    } else if (arg == "--config") {
      flags.config_only = true;
    } else {
      const bool help = arg == "--help" || arg == "-h";
      std::fprintf(help ? stdout : stderr,
                   "usage: %s [--quick] [--config]\n"
                   "  --quick   fewer iterations (a demo; noisier)\n"
                   "  --config  print the configuration (BLAS core, threads, tunables) and exit\n",
                   program);
      return help ? 0 : 2;
    }
  }
  return -1;
}

// The main of a benchmark or peer: parses the flags, returns run(flags), and turns an exception
// (memgrad's typed errors, libtorch's c10::Error, std's) into "program: message" and status 1.
template <typename Run>
int run_main(int argc, char** argv, const char* program, Run&& run) {
  Flags flags;
  if (const int status = parse_flags(argc, argv, program, flags); status >= 0) return status;
  try {
    return run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

// Timed steps are cut into this many blocks; time_training_steps calls its `between` after each.
inline constexpr int kStepBlocks = 10;

// The step times (ms) of a training benchmark: step(s) for s = 0, 1, 2, ..., each timed on its
// own, until `timed` steps are timed after `warmup` untimed ones. --quick: 5 + 30 steps, else
// 20 + 200. `between()` runs after every block of timed / kStepBlocks timed steps, outside the
// timing, and the step after it runs untimed too (it wakes the thread pool that went idle).
template <typename Step, typename Between>
std::vector<double> time_training_steps(const Flags& flags, Step&& step, Between&& between) {
  const int warmup = flags.quick ? 5 : 20;
  const int timed = flags.quick ? 30 : 200;
  const int block = timed / kStepBlocks;
  std::vector<double> step_ms;
  bool untimed = false;
  for (int s = 0; static_cast<int>(step_ms.size()) < timed; ++s) {
    const Clock::time_point start = Clock::now();
    step(s);
    if (s < warmup || untimed) {
      untimed = false;
      continue;
    }
    step_ms.push_back(seconds_since(start) * 1e3);
    if (static_cast<int>(step_ms.size()) % block == 0) {
      between();
      untimed = true;
    }
  }
  return step_ms;
}

// How far the machine's pace moved during the timed steps: the median step of the slowest of the
// kStepBlocks blocks (consecutive steps, as time_training_steps cuts them) over that of the
// fastest. Each block is a few seconds at most, so a spread well above 1 is the pace changing
// between blocks, as whatever shares the machine comes and goes, rather than single slow steps
// (those move the p90, not the blocks' medians). 1 with fewer steps than blocks.
inline double block_spread(const std::vector<double>& step_ms) {
  const size_t block = step_ms.size() / kStepBlocks;
  if (block == 0) return 1.0;
  double fastest = 0.0, slowest = 0.0;
  for (size_t first = 0; first + block <= step_ms.size(); first += block) {
    const auto begin = step_ms.begin() + static_cast<std::ptrdiff_t>(first);
    const double m = median(std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(block)));
    fastest = first == 0 ? m : std::min(fastest, m);
    slowest = std::max(slowest, m);
  }
  return slowest / fastest;
}

// What a training benchmark and its peer print, under the same names ("<prefix>_step_median",
// ...). The peaks of allocated and reserved bytes are n/a where the library keeps no statistics
// (libtorch's CPU allocator).
struct TrainingReport {
  std::vector<double> step_ms;
  std::optional<double> peak_allocated_mib, peak_reserved_mib;
  double startup_rss_mib = 0.0;
  double final_loss = 0.0;
};

inline void report_training(const std::string& prefix, const TrainingReport& r) {
  auto line = [&](const char* what, std::optional<double> value, const char* unit) {
    const std::string name = prefix + "_" + what;
    if (value) {
      report(name.c_str(), *value, unit);
    } else {
      report_missing(name.c_str(), unit);
    }
  };
  line("step_median", median(r.step_ms), "ms");
  line("step_p90", quantile(r.step_ms, 0.9), "ms");
  line("step_block_spread", block_spread(r.step_ms), "x");
  line("peak_allocated", r.peak_allocated_mib, "MiB");
  line("peak_reserved", r.peak_reserved_mib, "MiB");
  line("peak_rss", peak_rss_mib(), "MiB");
  line("startup_rss", r.startup_rss_mib, "MiB");
  line("final_loss", r.final_loss, "nats");
}

}  // namespace bench
