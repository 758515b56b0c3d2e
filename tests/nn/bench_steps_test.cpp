// The training benchmarks' step statistics (bench/bench_util.h): the median, the nearest-rank
// quantile and the spread of the blocks' medians that tells the machine's pace from single slow
// steps. Timings themselves are never tested; these are the arithmetic on them.
#include <doctest/doctest.h>

#include <vector>

#include "bench/bench_util.h"

TEST_CASE("median and quantile of step times") {
  CHECK(bench::median({}) == 0.0);
  CHECK(bench::median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(bench::median({4.0, 1.0, 3.0, 2.0}) == 3.0);  // the upper of the middle pair
  std::vector<double> steps;
  for (int i = 1; i <= 11; ++i) steps.push_back(static_cast<double>(i));
  CHECK(bench::quantile(steps, 0.9) == 10.0);
  CHECK(bench::quantile(steps, 0.0) == 1.0);
  CHECK(bench::quantile(steps, 1.0) == 11.0);
}

TEST_CASE("block_spread compares the blocks' medians, not single steps") {
  const auto blocks_of = [](const std::vector<double>& levels) {
    std::vector<double> steps;
    for (double level : levels) steps.insert(steps.end(), 5, level);
    return steps;
  };
  // One pace throughout: 1, whatever the count.
  CHECK(bench::block_spread(std::vector<double>(200, 4.0)) == 1.0);
  // Two blocks at 6 ms among eight at 4: the slowest block's median over the fastest's.
  CHECK(bench::block_spread(blocks_of({4, 4, 6, 4, 4, 4, 6, 4, 4, 4})) == 1.5);
  // The fastest block need not be the first.
  CHECK(bench::block_spread(blocks_of({5, 5, 5, 2, 5, 5, 5, 5, 5, 5})) == 2.5);
  // A slow step inside each block moves the p90, not the spread.
  std::vector<double> spikes = blocks_of({4, 4, 4, 4, 4, 4, 4, 4, 4, 4});
  for (size_t i = 0; i < spikes.size(); i += 5) spikes[i] = 9.0;
  CHECK(bench::block_spread(spikes) == 1.0);
  CHECK(bench::quantile(spikes, 0.9) == 9.0);
  // Fewer steps than blocks: no blocks to compare.
  CHECK(bench::block_spread({1.0, 2.0, 3.0}) == 1.0);
}
