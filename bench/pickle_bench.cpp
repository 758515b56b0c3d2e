// pickle_bench: reading a memory snapshot of about 100 MB, against the target of at most 10 s
// and at most 3x the file's size in resident memory.
//
// The snapshot is shaped like torch.cuda.memory._snapshot(): a few thousand segments with their
// blocks and one device trace of alloc/free events, each naming one of 500 tracebacks (shared
// lists of 8 to 31 shared frame dicts, as PyTorch's symbolizer shares them). It is written with
// write_pickle into a temporary file; a fresh process (this program again, through exec) reads
// it, so the reader's peak RSS (VmHWM, which includes the file's bytes read into memory and the
// program itself) is not the writer's.
//
//   pickle_bench [--mb N] [--protocol P]   write a snapshot of about N MB (default 100), read it
//   pickle_bench --read FILE               read FILE only (a snapshot Python wrote, for example)
//
// prints (bench/bench_util.h format), here on 2 cores of an AMD EPYC, release build:
//   pickle_write_time: 1.719 s
//   pickle_file_size: 98.68 MiB
//   pickle_read_time: 2.027 s
//   pickle_read_peak_rss: 800.4 MiB
//   pickle_read_rss_ratio: 8.111 x
//   target: read 99 MiB in at most 10 s: PASS; peak RSS at most 3x the file: FAIL
// The value costs about 390 bytes per trace event, which the pickle holds in about 57; CPython's
// pickle.load of the same snapshot peaks at 645 MiB (without the file's bytes) in 3.9 s.
// Not run by `./memgrad bench` (tools/run_bench.py lists the benchmarks it compares with peers).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "allocator/error.h"
#include "bench/bench_util.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/py_value.h"

namespace {

using namespace memgrad;

constexpr int kTracebacks = 500;
constexpr int kFrames = 2000;
// Average bytes one trace event takes in a protocol 4 pickle of this shape (measured).
constexpr double kBytesPerEvent = 60.0;

// A snapshot-like dict whose pickle is about `mb` MiB.
PyValue snapshot(double mb) {
  std::mt19937_64 rng(1);
  std::vector<PyValue> frames;
  for (int i = 0; i < kFrames; ++i) {
    frames.push_back(PyValue::dict({{"filename", fmt::format("/src/model/layer_{}.py", i % 97)},
                                    {"line", static_cast<int64_t>(rng() % 2000)},
                                    {"name", fmt::format("forward_{}", i)}}));
  }
  std::vector<PyValue> tracebacks;
  for (int t = 0; t < kTracebacks; ++t) {
    PyValue::Items stack;
    for (int f = 0, n = 8 + t % 24; f < n; ++f) stack.push_back(frames[rng() % kFrames]);
    tracebacks.push_back(PyValue::list(std::move(stack)));
  }
  const auto events = static_cast<int64_t>(mb * 1024 * 1024 / kBytesPerEvent);
  const char* kActions[] = {"alloc", "free_requested", "free_completed"};
  PyValue::Items trace;
  trace.reserve(static_cast<size_t>(events));
  for (int64_t i = 0; i < events; ++i) {
    trace.push_back(PyValue::dict(
        {{"action", kActions[i % 3]},
         {"addr", int64_t{139637976727552} + 512 * static_cast<int64_t>(rng() % 1000000)},
         {"size", static_cast<int64_t>(512 * (1 + rng() % 4096))},
         {"stream", 0},
         {"time_us", int64_t{1700000000000000} + i},
         {"frames", tracebacks[rng() % kTracebacks]}}));
  }
  PyValue::Items segments;
  for (int64_t s = 0; s < 2000; ++s) {
    PyValue::Items blocks;
    for (int64_t b = 0; b < 4; ++b) {
      blocks.push_back(PyValue::dict({{"address", int64_t{139637976727552} + (s * 4 + b) * 524288},
                                      {"size", 524288},
                                      {"requested_size", 500000},
                                      {"state", b % 2 ? "active_allocated" : "inactive"},
                                      {"frames", tracebacks[rng() % kTracebacks]}}));
    }
    segments.push_back(PyValue::dict({{"device", 0},
                                      {"address", int64_t{139637976727552} + s * 2097152},
                                      {"total_size", 2097152},
                                      {"stream", 0},
                                      {"segment_type", "large"},
                                      {"segment_pool_id", PyValue::tuple({0, 0})},
                                      {"blocks", PyValue::list(std::move(blocks))}}));
  }
  return PyValue::dict({{"segments", PyValue::list(std::move(segments))},
                        {"device_traces", PyValue::list({PyValue::list(std::move(trace))})}});
}

int read_only(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("pickle_bench: cannot open {}", path), path);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const double file_mib = static_cast<double>(bytes.size()) / (1024.0 * 1024.0);
  const auto start = bench::Clock::now();
  const PyValue value = read_pickle(bytes);
  const double seconds = bench::seconds_since(start);
  const double peak = bench::peak_rss_mib();
  bench::report("pickle_file_size", file_mib, "MiB");
  bench::report("pickle_read_time", seconds, "s");
  bench::report("pickle_read_peak_rss", peak, "MiB");
  bench::report("pickle_read_rss_ratio", peak / file_mib, "x");
  std::printf("target: read %.0f MiB in at most 10 s: %s; peak RSS at most 3x the file: %s\n",
              file_mib, seconds <= 10.0 ? "PASS" : "FAIL",
              peak <= 3.0 * file_mib ? "PASS" : "FAIL");
  return value.is_none() ? 1 : 0;
}

int write_then_read(double mb, int protocol, const char* self) {
  char path[] = "/tmp/pickle_bench_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw IoError("pickle_bench: cannot create a temporary file", path);
  close(fd);
  {
    const PyValue value = snapshot(mb);
    const auto start = bench::Clock::now();
    const std::string bytes = write_pickle(value, protocol);
    bench::report("pickle_write_time", bench::seconds_since(start), "s");
    std::ofstream out(path, std::ios::binary);
    out << bytes;
    if (!out) throw IoError("pickle_bench: cannot write the temporary file", path);
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    execl(self, self, "--read", path, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::remove(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 100.0;
  int protocol = 4;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--read" && i + 1 < argc) return read_only(argv[i + 1]);
      if (arg == "--mb" && i + 1 < argc) {
        mb = std::strtod(argv[++i], nullptr);
      } else if (arg == "--protocol" && i + 1 < argc) {
        protocol = std::atoi(argv[++i]);
      } else {
        std::fprintf(stderr, "usage: pickle_bench [--mb N] [--protocol P] | --read FILE\n");
        return 2;
      }
    }
    return write_then_read(mb, protocol, "/proc/self/exe");
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
