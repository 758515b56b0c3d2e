// Shared behaviour-example plumbing.
#include "examples/behaviours/behaviour.h"

#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "allocator/error.h"

namespace memgrad::examples {

void add_behaviour_flags(CLI::App& app, BehaviourFlags& flags) {
  app.add_option("--size", flags.size, "Scale factor for the tensors (1: the small default)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--device", flags.device, "cpu, sim:N or cuda[:N]")->capture_default_str();
  app.add_flag("--describe", flags.describe, "Print a one-line description and exit");
}

bool start_behaviour(const BehaviourInfo& info, const BehaviourFlags& flags) {
  if (flags.describe) {
    fmt::print("{:<4} {}\n", info.id, info.title);
    return true;
  }
  fmt::print("{} -- {}\nsource: {}\nclaim: {}\n\n", info.id, info.title, info.source, info.claim);
  return false;
}

void print_conclusion(const std::string& text) { fmt::print("\nconclusion: {}\n", text); }

int run_behaviour(int argc, char** argv, const BehaviourInfo& info,
                  int (*body)(const BehaviourFlags& flags), CLI::App* extra) {
  CLI::App local{fmt::format("{}: {}", info.id, info.title)};
  CLI::App& app = extra != nullptr ? *extra : local;
  BehaviourFlags flags;
  add_behaviour_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (start_behaviour(info, flags)) return 0;
  try {
    return body(flags);
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", info.id, e.what());
    return 1;
  }
}

}  // namespace memgrad::examples
