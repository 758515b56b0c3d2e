// Shared behaviour-example plumbing.
#include "examples/behaviours/behaviour.h"

#include <cstdio>
#include <utility>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "allocator/error.h"
#include "engine/cuda.h"
#include "engine/factories.h"
#include "engine/linalg.h"
#include "engine/memory.h"
#include "examples/common/report.h"

namespace memgrad::examples {

ExtraFlags& ExtraFlags::integer(const char* name, int64_t& value, const char* help, int64_t min,
                                int64_t max) {
  flags_.push_back({.name = name, .help = help, .integer = &value, .range = {min, max}});
  return *this;
}

ExtraFlags& ExtraFlags::one_of(const char* name, int64_t& value, const char* help,
                               std::vector<int64_t> choices) {
  flags_.push_back({.name = name, .help = help, .integer = &value, .choices = std::move(choices)});
  return *this;
}

ExtraFlags& ExtraFlags::path(const char* name, std::string& value, const char* help) {
  flags_.push_back({.name = name, .help = help, .path = &value});
  return *this;
}

namespace {

void add_behaviour_flags(CLI::App& app, BehaviourFlags& flags) {
  app.add_option("--size", flags.size, "Scale factor for the tensors (1: the small default)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--device", flags.device, "cpu, sim:N or cuda[:N]")->capture_default_str();
  app.add_flag("--describe", flags.describe, "Print a one-line description and exit");
}

void add_extra_flags(CLI::App& app, const ExtraFlags& extra) {
  for (const ExtraFlags::Flag& flag : extra.flags()) {
    if (flag.path != nullptr) {
      app.add_option(flag.name, *flag.path, flag.help)->capture_default_str();
      continue;
    }
    CLI::Option* option =
        app.add_option(flag.name, *flag.integer, flag.help)->capture_default_str();
    if (!flag.range.empty()) option->check(CLI::Range(flag.range[0], flag.range[1]));
    if (!flag.choices.empty()) option->check(CLI::IsMember(flag.choices));
  }
}

}  // namespace

bool start_behaviour(const BehaviourInfo& info, const BehaviourFlags& flags) {
  if (flags.describe) {
    fmt::print("{:<4} {}\n", info.id, info.title);
    return true;
  }
  fmt::print("{} -- {}\nsource: {}\nclaim: {}\n\n", info.id, info.title, info.source, info.claim);
  return false;
}

void print_conclusion(const std::string& text) { fmt::print("\nconclusion: {}\n", text); }

int64_t cublas_workspace_bytes(Device device) {
  if (!device.is_cuda()) return 0;
  return rounded(static_cast<int64_t>(cuda::cublas_workspace_size(device.index())));
}

bool take_cublas_workspace(Device device) {
  if (!device.is_cuda()) return true;
  // A workspace taken earlier in this process goes back first, so that exactly one is taken.
  cuda::clear_cublas_workspaces(device.index());
  const auto allocated = [device] { return static_cast<int64_t>(memory_allocated(device)); };
  const int64_t before = allocated();
  {
    const Tensor one = ones({1, 1}, TensorOptions(kFloat32).with_device(device));
    const Tensor product = matmul(one, one);
  }
  MemoryReport report(
      "Taken before measuring, by a first matrix product (kept for the process, as in PyTorch):");
  report.add("cuBLAS's workspace for the current stream", cublas_workspace_bytes(device),
             allocated() - before);
  report.print();
  fmt::print("\n");
  return report.all_match();
}

int run_behaviour(int argc, char** argv, const BehaviourInfo& info,
                  int (*body)(const BehaviourFlags& flags), const ExtraFlags& extra) {
  CLI::App app{fmt::format("{}: {}", info.id, info.title)};
  BehaviourFlags flags;
  add_behaviour_flags(app, flags);
  add_extra_flags(app, extra);
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
