// io_bench: reading and writing safetensors headers with many entries. A header of 200k entries
// (what a large model's sharded checkpoint index reaches) took about a minute to parse while
// every key was inserted into an ordered map in linear time; parsing is now linear in the
// header's size. No peer: the figure is memgrad's own, and its check is the target line below.
//
//   io_bench [--quick] [--config]
//
// prints (bench/bench_util.h format): the header's size, the time to encode and to decode it
// (median of a few runs), and one target line (decode under 1 s).
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_util.h"
#include "engine/factories.h"
#include "engine/io/safetensors.h"

int main(int argc, char** argv) {
  using namespace memgrad;
  bench::Flags flags;
  if (const int status = bench::parse_flags(argc, argv, "io_bench", flags); status >= 0) {
    return status;
  }
  bench::print_config("memgrad", 1);
  if (flags.config_only) return 0;
  const int entries = 200000;
  const int runs = flags.quick ? 1 : 3;
  io::SafetensorsFile file;
  const Tensor one = ones({1});  // 4 data bytes per entry: the header dominates
  for (int i = 0; i < entries; ++i) file.tensors.emplace_back(fmt::format("layer.{}.weight", i), one);
  std::vector<double> encode_s, decode_s;
  std::string bytes;
  for (int r = 0; r < runs; ++r) {
    const auto start = bench::Clock::now();
    bytes = io::encode_safetensors(file);
    encode_s.push_back(bench::seconds_since(start));
  }
  for (int r = 0; r < runs; ++r) {
    const auto start = bench::Clock::now();
    const io::SafetensorsFile back = io::decode_safetensors(bytes);
    decode_s.push_back(bench::seconds_since(start));
    if (back.tensors.size() != file.tensors.size()) {
      std::fprintf(stderr, "io_bench: decoded %zu tensors of %zu\n", back.tensors.size(),
                   file.tensors.size());
      return 1;
    }
  }
  const double decode_ms = 1e3 * bench::median(decode_s);
  bench::report("safetensors_200k_header_size", static_cast<double>(bytes.size()) / (1 << 20), "MiB");
  bench::report("safetensors_encode_200k_entries", 1e3 * bench::median(encode_s), "ms");
  bench::report("safetensors_decode_200k_entries", decode_ms, "ms");
  const bool ok = decode_ms < 1000.0;
  std::printf("target safetensors_decode_200k_entries < 1000 ms: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
