// Rank programs for the distributed tests. The test executable runs itself as N ranks
// (distributed::spawn_ranks): with MEMGRAD_TEST_WORKER=<name> in its environment, main() runs the
// worker of that name instead of the test cases. A worker checks its own results, prints one
// line per failed check and returns its exit status (0: every check held).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "distributed/spawn.h"

namespace memgrad::testing {

using WorkerFn = int (*)();

// Registers `fn` under `name` (from a static initializer); returns true.
bool register_worker(const char* name, WorkerFn fn);

// The worker named `name`, or null.
WorkerFn find_worker(const std::string& name);

// Runs worker `name` as `world_size` ranks with MEMGRAD_DIST_TIMEOUT=`timeout_s` and `env`.
distributed::SpawnResult run_workers(const char* name, int world_size, double timeout_s = 20,
                                     std::vector<std::pair<std::string, std::string>> env = {},
                                     bool stop_others_on_failure = true);

// Every rank's output, each line prefixed "[rank r] ", for failure messages.
std::string outputs(const distributed::SpawnResult& result);

// Prints "check failed: <what>" and counts the failure; `failures()` is the worker's count.
bool check(bool condition, const std::string& what);
int failures();

}  // namespace memgrad::testing
