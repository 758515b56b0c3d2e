// io_bench: reading and writing safetensors headers with many entries. A header of 200k entries
// (what a large model's sharded checkpoint index reaches) took about a minute to parse while
// every key was inserted into an ordered map in linear time; parsing is now linear in the
// header's size. No peer: the figure is memgrad's own, and its check is the target line below.
//
//   io_bench [--quick] [--config]
//
// prints (bench/bench_util.h format): the header's size, the time to encode it and to decode it
// and a header of 20k entries (medians of a few runs), and one target line: ten times the entries
// take at most twenty times as long to decode (linear; a quadratic parser takes a hundred times).
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "engine/factories.h"
#include "engine/io/safetensors.h"

namespace {

using namespace memgrad;

// A file of `entries` one-element tensors: the header dominates its size.
io::SafetensorsFile many_entries(int entries) {
  io::SafetensorsFile file;
  const Tensor one = ones({1});
  for (int i = 0; i < entries; ++i)
    file.tensors.emplace_back(fmt::format("layer.{}.weight", i), one);
  return file;
}

// Median seconds of `runs` calls of `op`.
template <typename Op>
double median_seconds(int runs, Op op) {
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    const auto start = bench::Clock::now();
    op();
    seconds.push_back(bench::seconds_since(start));
  }
  return bench::median(seconds);
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags;
  if (const int status = bench::parse_flags(argc, argv, "io_bench", flags); status >= 0) {
    return status;
  }
  bench::print_config("memgrad", 1);
  if (flags.config_only) return 0;
  const int runs = flags.quick ? 1 : 3;
  const io::SafetensorsFile small = many_entries(20000), large = many_entries(200000);
  std::string small_bytes, large_bytes;
  const double encode_s =
      median_seconds(runs, [&] { large_bytes = io::encode_safetensors(large); });
  small_bytes = io::encode_safetensors(small);
  size_t decoded = 0;
  const double small_s =
      median_seconds(runs, [&] { decoded = io::decode_safetensors(small_bytes).tensors.size(); });
  const double large_s =
      median_seconds(runs, [&] { decoded = io::decode_safetensors(large_bytes).tensors.size(); });
  if (decoded != large.tensors.size()) {
    std::fprintf(stderr, "io_bench: decoded %zu tensors of %zu\n", decoded, large.tensors.size());
    return 1;
  }
  bench::report("safetensors_200k_header_size", static_cast<double>(large_bytes.size()) / (1 << 20),
                "MiB");
  bench::report("safetensors_encode_200k_entries", 1e3 * encode_s, "ms");
  bench::report("safetensors_decode_20k_entries", 1e3 * small_s, "ms");
  bench::report("safetensors_decode_200k_entries", 1e3 * large_s, "ms");
  // Linear time: ten times the entries take at most twice ten times as long (a quadratic
  // parser takes a hundred times as long). A ratio of the same run, so any machine can check it.
  const double growth = large_s / small_s;
  bench::report("safetensors_decode_growth_10x_entries", growth, "x");
  const bool ok = growth <= 20.0;
  std::printf("target safetensors_decode_growth_10x_entries <= 20 (linear time): %s\n",
              ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
