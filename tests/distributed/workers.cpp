// The worker registry and the spawn helper of the distributed tests.
#include "tests/distributed/workers.h"

#include <map>
#include <sstream>

#include <fmt/format.h>

namespace memgrad::testing {
namespace {

std::map<std::string, WorkerFn>& registry() {
  static std::map<std::string, WorkerFn> workers;
  return workers;
}

int g_failures = 0;

}  // namespace

bool register_worker(const char* name, WorkerFn fn) {
  registry()[name] = fn;
  return true;
}

WorkerFn find_worker(const std::string& name) {
  const auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

distributed::SpawnResult run_workers(const char* name, int world_size, double timeout_s,
                                     std::vector<std::pair<std::string, std::string>> env,
                                     bool stop_others_on_failure) {
  distributed::SpawnOptions options;
  options.env = std::move(env);
  options.env.emplace_back("MEMGRAD_TEST_WORKER", name);
  options.env.emplace_back("MEMGRAD_DIST_TIMEOUT", fmt::format("{}", timeout_s));
  options.timeout = std::chrono::seconds(120);
  options.stop_others_on_failure = stop_others_on_failure;
  return distributed::spawn_ranks(world_size, options);
}

std::string outputs(const distributed::SpawnResult& result) {
  std::string all;
  for (const distributed::RankOutcome& r : result.ranks) {
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) all += fmt::format("[rank {}] {}\n", r.rank, line);
    all += fmt::format("[rank {}] (exit status {}, signal {})\n", r.rank, r.exit_status, r.signal);
  }
  return all;
}

bool check(bool condition, const std::string& what) {
  if (!condition) {
    fmt::print("check failed: {}\n", what);
    ++g_failures;
  }
  return condition;
}

int failures() { return g_failures; }

}  // namespace memgrad::testing
