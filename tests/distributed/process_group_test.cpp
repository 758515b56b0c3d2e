// ProcessGroup on 2, 3 and 4 CPU ranks over Gloo (loopback, a file store): PyTorch's results for
// every collective, the bytes each allocates, the typed error of a mismatched call on every
// rank (and of a call one rank's own checks rejected), the error naming a rank that died, and the
// failure note that lets a launcher name it.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "distributed/error.h"
#include "distributed/failure_note.h"
#include "distributed/process_group.h"
#include "engine/memgrad.h"
#include "tests/distributed/workers.h"

using namespace memgrad;
using namespace memgrad::distributed;
using memgrad::testing::check;
using memgrad::testing::failures;
using memgrad::testing::outputs;
using memgrad::testing::run_workers;

namespace {

int64_t allocated() { return static_cast<int64_t>(memory_allocated(kCPU)); }

bool values_are(const Tensor& t, const std::vector<double>& expected) {
  const Tensor d = t.to(kFloat64).contiguous();
  const auto* v = static_cast<const double*>(d.data_ptr());
  if (d.numel() != static_cast<int64_t>(expected.size())) return false;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (v[i] != expected[i]) return false;
  }
  return true;
}

// Waiting on `work` fails with a RankFailureError naming the rank that died, each time it is
// waited on (`waits` times).
void check_fails_naming(const std::shared_ptr<Work>& work, int dead, const char* what,
                        int waits = 1) {
  for (int attempt = 0; attempt < waits; ++attempt) {
    try {
      work->wait();
      check(false, fmt::format("{} with a dead peer completed", what));
    } catch (const RankFailureError& e) {
      check(std::string(e.what()).find(fmt::format("rank {} (pid", dead)) != std::string::npos,
            e.what());
    }
  }
}

// Every collective against its closed form, and what each allocates.
int collectives_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int r = pg->rank(), n = pg->size();
  const double rank_sum = n * (n - 1) / 2.0;  // 0 + 1 + ... + (n - 1)

  // all_reduce sum and average of (rank + 1): n (n + 1) / 2 and (n + 1) / 2. Allocates nothing.
  Tensor a = full({5}, r + 1.0);
  reset_peak_memory_stats(kCPU);
  const int64_t before = allocated();
  pg->all_reduce(a);
  check(static_cast<int64_t>(max_memory_allocated(kCPU)) == before, "all_reduce allocates 0");
  check(values_are(a, std::vector<double>(5, n * (n + 1) / 2.0)), "all_reduce sum");
  Tensor avg = full({3}, static_cast<double>(r), TensorOptions(kFloat64));
  pg->all_reduce(avg, ReduceOp::Avg);
  check(values_are(avg, std::vector<double>(3, rank_sum / n)), "all_reduce avg (float64)");
  Tensor ints = full({2}, static_cast<double>(r), TensorOptions(kInt64));
  pg->all_reduce(ints);
  check(values_are(ints, {rank_sum, rank_sum}), "all_reduce sum (int64)");

  // reduce_scatter: input[i] = 100 r + i over n x 3 elements; rank r receives elements
  // [3 r, 3 r + 3) of the sum: sum over q of (100 q + i) = 100 rank_sum + n i.
  Tensor input = arange(n * 3, TensorOptions(kFloat32)) + 100.0 * r;
  Tensor output = empty({3});
  reset_peak_memory_stats(kCPU);
  const int64_t before_rs = allocated();
  pg->reduce_scatter(output, input);
  std::vector<double> expected;
  for (int i = 3 * r; i < 3 * r + 3; ++i) expected.push_back(100.0 * rank_sum + n * i);
  check(values_are(output, expected), "reduce_scatter sum");
  // One staging buffer of input's nbytes (rounded to 512 by the caching allocator), freed.
  check(static_cast<int64_t>(max_memory_allocated(kCPU)) - before_rs == 512,
        fmt::format("reduce_scatter stages 512 B, measured {}",
                    static_cast<int64_t>(max_memory_allocated(kCPU)) - before_rs));
  check(allocated() == before_rs, "reduce_scatter frees its staging");

  // all_gather: rank q contributes (q, q): out = 0 0 1 1 ... ; in place from a view too.
  Tensor gathered = empty({2 * n});
  reset_peak_memory_stats(kCPU);
  const int64_t before_ag = allocated();
  pg->all_gather(gathered, full({2}, static_cast<double>(r)));
  std::vector<double> pairs;
  for (int q = 0; q < n; ++q) pairs.insert(pairs.end(), {double(q), double(q)});
  check(values_are(gathered, pairs), "all_gather");
  Tensor in_place = zeros({2 * n});
  Tensor mine = in_place.narrow(0, 2 * r, 2);
  mine.fill_(static_cast<double>(r));
  pg->all_gather(in_place, mine);
  check(values_are(in_place, pairs), "all_gather in place");
  check(static_cast<int64_t>(max_memory_allocated(kCPU)) - before_ag ==
            2 * 512,  // the two tensors made above (full({2}) and in_place); nothing in Gloo
        "all_gather allocates nothing");

  // broadcast from the last rank.
  Tensor b = full({4}, static_cast<double>(r));
  pg->broadcast(b, n - 1);
  check(values_are(b, std::vector<double>(4, n - 1.0)), "broadcast");
  pg->barrier();
  check(pg->collectives_run() == 8,
        fmt::format("8 collectives, counted {}", pg->collectives_run()));
  return failures() == 0 ? 0 : 1;
}

// The ring collectives (GlooRing) put every element in its place: element-wise distinct values
// at sizes that leave chunks empty (fewer elements than ranks), split them unevenly, and cut
// them into several pieces (a chunk above 200 KiB); sums in every dtype, all_gather and
// reduce_scatter (an all-to-all) of blocks of several pieces. Values are small integers, exact
// in every dtype, so the checks compare exactly.
int ring_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int r = pg->rank(), n = pg->size();
  const double weights = n * (n + 1) / 2.0;  // sum over ranks q of (q + 1)
  auto pattern = [](int64_t i, int64_t period) { return static_cast<double>(i % period); };
  // Rank q holds (q + 1) f(i); the sum is weights x f(i).
  auto check_sum = [&](int64_t count, DType dtype, int64_t period) {
    std::vector<double> mine(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) mine[static_cast<size_t>(i)] = (r + 1) * pattern(i, period);
    Tensor t = from_vector(mine).to(dtype);
    pg->all_reduce(t);
    const Tensor d = t.to(kFloat64);
    const auto* v = static_cast<const double*>(d.data_ptr());
    for (int64_t i = 0; i < count; ++i) {
      if (v[i] != weights * pattern(i, period)) {
        check(false, fmt::format("all_reduce of {} {}: element {} is {}, expected {}", count,
                                 dtype_name(dtype), i, v[i], weights * pattern(i, period)));
        return;
      }
    }
  };
  const int64_t piece = 200 * 1024 / 4;  // float32 elements in one piece
  for (int64_t count :
       {int64_t{1}, int64_t{3}, int64_t{7}, n * piece + 1, 3 * n * piece + 5, int64_t{1} << 20}) {
    check_sum(count, kFloat32, 4093);
  }
  check_sum(2 * n * piece + 3, kFloat64, 1000003);
  check_sum(2 * n * piece + 3, kInt64, 1000003);
  check_sum(4 * n * piece + 1, kFloat16, 8);  // 2-byte elements: twice the float32 pieces
  check_sum(4 * n * piece + 1, kBFloat16, 8);

  // all_gather: rank q's block holds q x 100000 + j, 30001 float64 (two pieces).
  const int64_t block = 30001;
  std::vector<double> own(static_cast<size_t>(block));
  for (int64_t j = 0; j < block; ++j) own[static_cast<size_t>(j)] = r * 100000.0 + j;
  Tensor gathered = empty({n * block}, TensorOptions(kFloat64));
  pg->all_gather(gathered, from_vector(own));
  const auto* g = static_cast<const double*>(gathered.data_ptr());
  for (int64_t i = 0; i < n * block; ++i) {
    const double expected = (i / block) * 100000.0 + static_cast<double>(i % block);
    if (g[i] != expected) {
      check(false, fmt::format("all_gather: element {} is {}, expected {}", i, g[i], expected));
      break;
    }
  }

  // reduce_scatter: input[i] = (r + 1) (i mod 977) over n x 30001 float64; rank r receives
  // weights x ((r x 30001 + j) mod 977).
  std::vector<double> input(static_cast<size_t>(n * block));
  for (int64_t i = 0; i < n * block; ++i) input[static_cast<size_t>(i)] = (r + 1) * pattern(i, 977);
  Tensor scattered = empty({block}, TensorOptions(kFloat64));
  pg->reduce_scatter(scattered, from_vector(input));
  const auto* s = static_cast<const double*>(scattered.data_ptr());
  for (int64_t j = 0; j < block; ++j) {
    const double expected = weights * pattern(r * block + j, 977);
    if (s[j] != expected) {
      check(false, fmt::format("reduce_scatter: element {} is {}, expected {}", j, s[j], expected));
      break;
    }
  }
  return failures() == 0 ? 0 : 1;
}

// all_reduce_async: three in flight at once come back in order with all_reduce's results; an
// average is divided, and the version bumped (twice, as all_reduce does), only by wait(); a
// blocking collective after them waits for them first (its result is right and the count is every
// collective once); nothing is allocated on the device by the calls in flight. Then the last rank
// exits: the next async all_reduce's wait() throws RankFailureError naming it, and so does every
// later call.
int async_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int r = pg->rank(), n = pg->size();
  const double rank_sum = n * (n - 1) / 2.0;
  Tensor sum = full({1000}, r + 1.0);
  Tensor avg = full({7}, static_cast<double>(r), TensorOptions(kFloat64));
  Tensor ints = full({3}, static_cast<double>(r), TensorOptions(kInt64));
  const uint64_t version = avg.impl()->storage().version();
  reset_peak_memory_stats(kCPU);
  const int64_t before = allocated();
  const std::shared_ptr<Work> works[] = {pg->all_reduce_async(sum),
                                         pg->all_reduce_async(avg, ReduceOp::Avg),
                                         pg->all_reduce_async(ints)};
  check(static_cast<int64_t>(max_memory_allocated(kCPU)) == before, "in flight: no allocation");
  check(avg.impl()->storage().version() == version, "in flight: the version is unchanged");
  works[1]->wait();
  check(works[1]->is_completed(), "a waited Work is completed");
  // all_reduce's two bumps: the data moved, then the division in place.
  check(avg.impl()->storage().version() == version + 2, "wait() bumps the version");
  works[1]->wait();  // a second wait finishes nothing twice
  check(avg.impl()->storage().version() == version + 2, "a second wait() bumps nothing");
  check(values_are(avg, std::vector<double>(7, rank_sum / n)), "all_reduce_async avg");
  Tensor b = full({4}, static_cast<double>(r));
  pg->broadcast(b, 0);  // waits for sum and ints first
  check(works[0]->is_completed() && works[2]->is_completed(), "broadcast waited for both");
  check(values_are(sum, std::vector<double>(1000, n * (n + 1) / 2.0)), "all_reduce_async sum");
  check(values_are(ints, {rank_sum, rank_sum, rank_sum}), "all_reduce_async sum (int64)");
  check(values_are(b, std::vector<double>(4, 0.0)), "broadcast after the async calls");
  check(pg->collectives_run() == 4,
        fmt::format("4 collectives, counted {}", pg->collectives_run()));
  // A rejected call throws at once, as all_reduce does, on every rank alike.
  try {
    pg->all_reduce_async(full({2, 2}, 1.0).t());
    check(false, "a non-contiguous tensor was accepted");
  } catch (const ValueError&) {
  }
  pg->barrier();
  const int dead = n - 1;
  if (r == dead) _exit(3);
  Tensor t = ones({1000});
  const std::shared_ptr<Work> work = pg->all_reduce_async(t);
  check_fails_naming(work, dead, "an async all_reduce", 2);
  try {
    pg->barrier();
    check(false, "a broken group ran a barrier");
  } catch (const RankFailureError&) {
  }
  return failures() == 0 ? 0 : 1;
}

// all_gather_async and reduce_scatter_async: a gather in flight with an all_reduce_async queued
// behind it come back in order with the blocking collectives' results; the output's version is
// bumped by wait() only, in place (input inside output) as well. reduce_scatter_async allocates
// its staging buffer (N pieces) on the calling thread when called and frees it in wait(), which
// also sums and averages. A rejected call throws at once on every rank; a dead peer makes wait()
// throw RankFailureError naming it.
int async_gather_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int r = pg->rank(), n = pg->size();
  Tensor out = zeros({n * 5});
  const Tensor piece = full({5}, r + 1.0);
  Tensor in_place = zeros({n * 3});
  Tensor mine = in_place.narrow(0, r * 3, 3);
  mine.fill_(10.0 * r);
  Tensor sum = full({6}, 1.0);
  const uint64_t version = out.impl()->storage().version();
  const std::shared_ptr<Work> gathered = pg->all_gather_async(out, piece);
  const std::shared_ptr<Work> gathered_in_place = pg->all_gather_async(in_place, mine);
  const std::shared_ptr<Work> reduced = pg->all_reduce_async(sum);
  check(out.impl()->storage().version() == version, "in flight: the version is unchanged");
  reduced->wait();  // the gathers were queued before it: done too, not yet finished
  check(gathered->is_completed() && gathered_in_place->is_completed(), "done in order");
  check(out.impl()->storage().version() == version, "not waited: the version is unchanged");
  gathered->wait();
  gathered_in_place->wait();
  check(out.impl()->storage().version() == version + 1, "wait() bumps the version once");
  std::vector<double> expected, expected_in_place;
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < 5; ++i) expected.push_back(k + 1.0);
    for (int i = 0; i < 3; ++i) expected_in_place.push_back(10.0 * k);
  }
  check(values_are(out, expected), "all_gather_async");
  check(values_are(in_place, expected_in_place), "all_gather_async in place");
  check(values_are(sum, std::vector<double>(6, n)), "all_reduce_async behind it");
  check(pg->collectives_run() == 3,
        fmt::format("3 collectives, counted {}", pg->collectives_run()));
  // Rank r contributes r + j to element j of the 4 N elements; rank r's piece is 4 elements.
  Tensor input = arange(0, n * 4, 1, TensorOptions(kFloat32)).add(static_cast<double>(r));
  Tensor mine_avg = zeros({4});
  const int64_t before = allocated();
  const std::shared_ptr<Work> scattered =
      pg->reduce_scatter_async(mine_avg, input, ReduceOp::Avg, CallCheck::Skip);
  check(allocated() - before == 512,
        fmt::format("staging allocated at the call: {} B", allocated() - before));
  scattered->wait();
  check(allocated() == before, "wait() freed the staging buffer");
  std::vector<double> expected_avg;
  for (int j = 0; j < 4; ++j) expected_avg.push_back(r * 4 + j + (n - 1) / 2.0);
  check(values_are(mine_avg, expected_avg), "reduce_scatter_async avg");
  try {
    pg->reduce_scatter_async(zeros({3}), input);
    check(false, "an output of the wrong size was accepted");
  } catch (const ShapeError& e) {
    check(std::string(e.what()).find("world size") != std::string::npos, e.what());
  }
  try {
    pg->all_gather_async(zeros({n * 5 + 1}), piece);
    check(false, "an output of the wrong size was accepted");
  } catch (const ShapeError& e) {
    check(std::string(e.what()).find("world size") != std::string::npos, e.what());
  }
  pg->barrier();
  const int dead = n - 1;
  if (r == dead) _exit(3);
  const std::shared_ptr<Work> work = pg->all_gather_async(zeros({n * 1000}), ones({1000}));
  const std::shared_ptr<Work> after =
      pg->reduce_scatter_async(zeros({1000}), ones({n * 1000}), ReduceOp::Sum, CallCheck::Skip);
  check_fails_naming(work, dead, "an async all_gather");
  check_fails_naming(after, dead, "an async reduce_scatter");
  return failures() == 0 ? 0 : 1;
}

// Rank r all-reduces 4 + r elements: every rank throws CollectiveMismatchError, then the group
// still works.
int mismatch_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int r = pg->rank();
  try {
    pg->all_reduce(zeros({4 + r}));
    check(false, "a mismatched all_reduce returned");
  } catch (const CollectiveMismatchError& e) {
    check(e.op() == "all_reduce" && e.sequence() == 1 && e.rank() == r, "fields");
    check(e.mismatching_rank() == 1, "mismatching rank 1");
    check(e.calls().size() == static_cast<size_t>(pg->size()), "one call per rank");
    check(e.calls()[1] == "all_reduce float32 numel 5", "rank 1's call: " + e.calls()[1]);
    check(std::string(e.what()).find("does not match across ranks") != std::string::npos, e.what());
  }
  try {
    pg->broadcast(zeros({2}, TensorOptions(r == 0 ? kFloat32 : kFloat64)), 0);
    check(false, "a dtype mismatch returned");
  } catch (const CollectiveMismatchError& e) {
    check(e.calls()[1] == "broadcast float64 numel 2 from rank 0", e.calls()[1]);
  }
  Tensor t = ones({3});
  pg->all_reduce(t);
  check(values_are(t, std::vector<double>(3, pg->size())), "the group still works");
  return failures() == 0 ? 0 : 1;
}

// Seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A rank whose own checks reject its arguments: rank 1 all-reduces a tensor that is not
// contiguous, then rank 0 reduce-scatters into an output too large for its piece. The rejecting
// rank throws its own typed error, every other rank a CollectiveMismatchError naming it and
// quoting that error, at once (the timeout is 20 s); then the group still works.
int rejected_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int r = pg->rank(), n = pg->size();
  auto start = std::chrono::steady_clock::now();
  try {
    pg->all_reduce(r == 1 ? ones({3, 2}).t() : ones({2, 3}));
    check(false, "an all_reduce rank 1 rejected returned");
  } catch (const CollectiveMismatchError& e) {
    check(r != 1, fmt::format("rank 1 threw a mismatch, not its own error: {}", e.what()));
    check(e.op() == "all_reduce" && e.sequence() == 1 && e.rank() == r, "fields");
    check(e.mismatching_rank() == 1, fmt::format("rank {} named", e.mismatching_rank()));
    check(e.calls().size() == static_cast<size_t>(n), "one call per rank");
    check(e.calls()[0] == "all_reduce float32 numel 6", "rank 0's call: " + e.calls()[0]);
    check(e.calls()[1].find("all_reduce, rejected by rank 1: [all_reduce] tensor of shape [2, 3] "
                            "is not contiguous") == 0,
          "rank 1's call: " + e.calls()[1]);
    check(std::string(e.what()).find("rank 1 rejected its own arguments") != std::string::npos,
          e.what());
  } catch (const ValueError& e) {
    check(r == 1, fmt::format("rank {} threw rank 1's error: {}", r, e.what()));
    check(std::string(e.what()).find("is not contiguous") != std::string::npos, e.what());
  }
  double seconds = seconds_since(start);
  check(seconds < 2.0, fmt::format("the rejected all_reduce failed after {:.1f} s", seconds));

  start = std::chrono::steady_clock::now();
  try {
    Tensor output = empty({r == 0 ? 3 : 2});
    pg->reduce_scatter(output, ones({2 * n}));
    check(false, "a reduce_scatter rank 0 rejected returned");
  } catch (const CollectiveMismatchError& e) {
    check(r != 0, fmt::format("rank 0 threw a mismatch, not its own error: {}", e.what()));
    check(e.op() == "reduce_scatter" && e.sequence() == 2, "fields");
    check(e.mismatching_rank() == 0, fmt::format("rank {} named", e.mismatching_rank()));
    const std::string expected = fmt::format(
        "reduce_scatter, rejected by rank 0: [reduce_scatter] input of shape [{}] must hold "
        "world size ({}) x output's 3 elements",
        2 * n, n);
    check(e.calls()[0].find(expected) == 0, "rank 0's call: " + e.calls()[0]);
  } catch (const ShapeError& e) {
    check(r == 0, fmt::format("rank {} threw rank 0's error: {}", r, e.what()));
  }
  seconds = seconds_since(start);
  check(seconds < 2.0, fmt::format("the rejected reduce_scatter failed after {:.1f} s", seconds));

  Tensor t = ones({3});
  pg->all_reduce(t);
  check(values_are(t, std::vector<double>(3, n)), "the group still works");
  check(pg->collectives_run() == 3,
        fmt::format("3 collectives, counted {}", pg->collectives_run()));
  return failures() == 0 ? 0 : 1;
}

// The last rank exits without a word after the first barrier; the others' next collective
// throws RankFailureError naming it, within the timeout, and every later call throws again.
int dead_rank_worker() {
  auto pg = init_process_group(Backend::Gloo);
  pg->barrier();
  const int dead = pg->size() - 1;
  if (pg->rank() == dead) _exit(3);
  const auto start = std::chrono::steady_clock::now();
  try {
    Tensor t = ones({1000});
    pg->all_reduce(t);
    check(false, "an all_reduce with a dead peer returned");
  } catch (const RankFailureError& e) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto& failed = e.failed_ranks();
    check(std::find(failed.begin(), failed.end(), dead) != failed.end(),
          fmt::format("rank {} named: {}", dead, e.what()));
    check(std::string(e.what()).find(fmt::format("rank {} (pid", dead)) != std::string::npos,
          e.what());
    // Timeout (3 s) plus the second of looking for exited processes.
    check(seconds < 5.0, fmt::format("failed after {:.1f} s", seconds));
    fmt::print("failed after {:.2f} s: {}\n", seconds, e.what());
    // The note spawn_ranks reads to name the dead rank, not this one, as the first failure.
    const auto note = read_failure_note(std::getenv(kErrorFileVariable));
    // Ranks that already failed and ended may be named too: the dead rank must be among them.
    check(note && std::find(note->gone.begin(), note->gone.end(), dead) != note->gone.end() &&
              note->message == e.what(),
          note ? fmt::format("note: gone {}, '{}'", fmt::join(note->gone, " "), note->message)
               : "no failure note");
  }
  // A write to the dead peer's socket must fail with EPIPE (a typed error), not end this rank.
  struct sigaction pipe {};
  sigaction(SIGPIPE, nullptr, &pipe);
  check(pipe.sa_handler == SIG_IGN, "SIGPIPE is not ignored after init_process_group(Gloo)");
  try {
    pg->barrier();
    check(false, "a broken group ran a barrier");
  } catch (const RankFailureError&) {
  }
  return failures() == 0 ? 0 : 1;
}

// Rank 1 does not call the collective for 4 s (alive, stuck): rank 0 throws when its timeout
// (1 s) runs out, naming nobody.
int stuck_rank_worker() {
  auto pg = init_process_group(Backend::Gloo);
  if (pg->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    try {
      pg->barrier();  // rank 0 has given up and exited by now
    } catch (const DistributedError&) {
    }
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    pg->barrier();
    check(false, "a barrier without its peer returned");
  } catch (const RankFailureError& e) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check(e.failed_ranks().empty(), "nobody has exited");
    check(std::string(e.what()).find("no rank on this host has exited") != std::string::npos,
          e.what());
    check(seconds >= 0.9 && seconds < 3.5, fmt::format("failed after {:.1f} s", seconds));
  }
  return failures() == 0 ? 0 : 1;
}

// The bytes sent on the wire: at least the ring's payload, 2 (n - 1) / n x nbytes, and the
// same for two identical calls (Gloo's messages do not depend on timing).
int wire_bytes_worker() {
  auto pg = init_process_group(Backend::Gloo);
  const int n = pg->size();
  Tensor t = ones({1 << 18});  // 1 MiB
  const uint64_t start = *pg->wire_bytes_sent();
  pg->all_reduce(t);
  const uint64_t first = *pg->wire_bytes_sent() - start;
  pg->all_reduce(t);
  const uint64_t second = *pg->wire_bytes_sent() - start - first;
  const uint64_t payload = 2 * static_cast<uint64_t>(n - 1) * t.nbytes() / static_cast<uint64_t>(n);
  check(first >= payload && first < payload + 16384,
        fmt::format("sent {} B for a payload of {} B", first, payload));
  check(first == second, fmt::format("two all_reduces sent {} and {} B", first, second));
  fmt::print("all_reduce of 1 MiB on {} ranks: {} B sent (payload {} B)\n", n, first, payload);
  return failures() == 0 ? 0 : 1;
}

// Under ./memgrad launch (tests/tools/launch_test.py): rank 1 throws after the first barrier
// while the others wait in an all_reduce; the launcher must name rank 1 and stop the rest.
int throws_worker() {
  auto pg = init_process_group(Backend::Gloo);
  pg->barrier();
  if (pg->rank() == 1) throw ValueError("rank 1 fails on purpose", "throws_worker");
  Tensor t = ones({4});
  pg->all_reduce(t);
  return 0;
}

// Every rank returns as soon as init_process_group does: init ends with a barrier, so no rank
// leaves while a peer is still connecting to it.
int exits_after_init_worker() {
  init_process_group(Backend::Gloo);
  return 0;
}

// Under ./memgrad launch: a line through C stdio (buffered when stdout is a pipe), then a death
// that flushes nothing; the launcher's line buffering must have sent the line already.
int prints_then_dies_worker() {
  fmt::print("rank {} printed this before it died\n", std::getenv("RANK"));
  std::raise(SIGKILL);
  return 0;
}

// Under ./memgrad launch: rank 0 joins the group and then stops itself (SIGSTOP) or sleeps,
// never reaching the barrier rank 1 waits in (MEMGRAD_DIST_TIMEOUT short). The launcher must
// name rank 0 as the stuck one, not rank 1 whose barrier timed out.
int stuck_peer_worker(bool stop_itself) {
  auto pg = init_process_group(Backend::Gloo);
  if (pg->rank() == 0) {
    if (stop_itself) std::raise(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  pg->barrier();
  return 0;
}
int stopped_peer_worker() { return stuck_peer_worker(true); }
int sleeping_peer_worker() { return stuck_peer_worker(false); }

const bool kRegistered =
    memgrad::testing::register_worker("stopped_peer", stopped_peer_worker) &&
    memgrad::testing::register_worker("sleeping_peer", sleeping_peer_worker) &&
    memgrad::testing::register_worker("throws", throws_worker) &&
    memgrad::testing::register_worker("prints_then_dies", prints_then_dies_worker) &&
    memgrad::testing::register_worker("exits_after_init", exits_after_init_worker) &&
    memgrad::testing::register_worker("collectives", collectives_worker) &&
    memgrad::testing::register_worker("ring", ring_worker) &&
    memgrad::testing::register_worker("async", async_worker) &&
    memgrad::testing::register_worker("async_gather", async_gather_worker) &&
    memgrad::testing::register_worker("mismatch", mismatch_worker) &&
    memgrad::testing::register_worker("rejected", rejected_worker) &&
    memgrad::testing::register_worker("dead_rank", dead_rank_worker) &&
    memgrad::testing::register_worker("stuck_rank", stuck_rank_worker) &&
    memgrad::testing::register_worker("wire_bytes", wire_bytes_worker);

}  // namespace

TEST_SUITE("distributed") {
TEST_CASE("collectives give PyTorch's results on 2 and 4 ranks; only reduce_scatter stages bytes") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("collectives", n);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE("the ring collectives put every element in its place on 2, 3 and 4 ranks") {
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("ring", n);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE("all_reduce_async runs in order on the communication thread; wait() finishes it") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("async", n, 3, {}, false);
    INFO(outputs(result));
    REQUIRE_EQ(result.ranks.size(), static_cast<size_t>(n));
    for (int r = 0; r + 1 < n; ++r) CHECK_EQ(result.ranks[r].exit_status, 0);
    CHECK_EQ(result.ranks[n - 1].exit_status, 3);
  }
}

TEST_CASE("all_gather_async and reduce_scatter_async run in order; wait() finishes them") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("async_gather", n, 3, {}, false);
    INFO(outputs(result));
    REQUIRE_EQ(result.ranks.size(), static_cast<size_t>(n));
    for (int r = 0; r + 1 < n; ++r) CHECK_EQ(result.ranks[r].exit_status, 0);
    CHECK_EQ(result.ranks[n - 1].exit_status, 3);
  }
}

TEST_CASE("ranks that call different collectives all get CollectiveMismatchError") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("mismatch", n);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE(
    "a rank whose own checks reject its call: its own error there, at once a "
    "CollectiveMismatchError naming it on the others") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("rejected", n, 20);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE("ranks that exit right after init_process_group do not fail their peers") {
  for (int round = 0; round < 5; ++round) {
    CAPTURE(round);
    const SpawnResult result = run_workers("exits_after_init", 4, 20);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}

TEST_CASE("a rank that exits makes the others fail within the timeout, naming it") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("dead_rank", n, 3, {}, false);
    INFO(outputs(result));
    REQUIRE_EQ(result.ranks.size(), static_cast<size_t>(n));
    for (int r = 0; r + 1 < n; ++r) CHECK_EQ(result.ranks[r].exit_status, 0);
    CHECK_EQ(result.ranks[n - 1].exit_status, 3);
  }
}

TEST_CASE("failure notes lead from a rank that found peers gone to the rank that failed first") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("memgrad-notes-{}", getpid());
  std::filesystem::create_directories(dir);
  auto path = [&](int r) { return (dir / fmt::format("rank-{}.error", r)).string(); };
  auto write_as = [&](int r, std::vector<int> gone) {
    setenv(kErrorFileVariable, path(r).c_str(), 1);
    write_failure_note({std::move(gone), fmt::format("rank {} found peers gone", r)});
    unsetenv(kErrorFileVariable);
  };
  write_as(2, {0, 3});  // rank 2 found ranks 0 and 3 gone; 0 had found 1 gone
  write_as(0, {1});
  const auto note = read_failure_note(path(2));
  REQUIRE(note.has_value());
  CHECK_EQ(note->gone, std::vector<int>{0, 3});
  CHECK_EQ(note->message, "rank 2 found peers gone");
  CHECK_FALSE(read_failure_note(path(5)).has_value());  // no note
  std::ofstream(path(4)) << "Traceback (most recent call last):\n";
  CHECK_FALSE(read_failure_note(path(4)).has_value());  // not a note

  std::map<int, int> status = {{0, 1}, {1, 7}, {2, 1}, {3, 1}};
  auto failed = [&](int r) { return status[r]; };
  CHECK_EQ(root_failure(2, 4, path, failed), 1);  // 2 -> 0 -> 1, whose own note is absent
  CHECK_EQ(root_failure(3, 4, path, failed), 3);  // no note: its own failure
  status[1] = 0;                                  // rank 1 exited cleanly before the others:
  CHECK_EQ(root_failure(2, 4, path, failed), 0);  // rank 0's failure is the first one
  status[0] = 0;
  CHECK_EQ(root_failure(2, 4, path, failed), 3);  // the next rank rank 2 named
  write_as(1, {2});                               // a cycle is followed at most world_size steps
  status = {{0, 1}, {1, 1}, {2, 1}};
  write_as(0, {1});
  write_as(2, {0});
  const int root = root_failure(2, 3, path, failed);
  CHECK((root >= 0 && root < 3));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a rank that is stuck makes the others fail when the timeout runs out") {
  const SpawnResult result = run_workers("stuck_rank", 2, 1, {}, false);
  INFO(outputs(result));
  CHECK(result.ok());
}

TEST_CASE("the bytes sent are measured on the wire: the ring's payload plus Gloo's headers") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    const SpawnResult result = run_workers("wire_bytes", n);
    INFO(outputs(result));
    CHECK(result.ok());
  }
}
}  // TEST_SUITE("distributed")
