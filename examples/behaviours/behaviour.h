// What every behaviour example shares: its identity, the standard flags, the printed header
// and conclusion.
//
// Each behaviour bNN lives in examples/behaviours/bNN_<name>.cpp with a header bNN_<name>.h.
// The .cpp holds the measurement as a function (returning its numbers) and bNN_<name>_main(),
// the program that prints them. Every .cpp is compiled once, into the behaviours library: the
// program is a generated main() that calls bNN_<name>_main() (main.cpp.in), and the test suite
// links the same library and asserts the claim on small sizes through the same function, so the
// program and its test cannot drift apart.
//
// Output layout of every program:
//   B5 -- views share storage; clone copies            (the id and title)
//   source: seeds 001 §6 and FAQ                         (the articles, by file)
//   claim: <what the articles say, paraphrased>
//   <the expected vs measured table(s)>
//   conclusion: <one line, computed from what was measured>
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

struct BehaviourInfo {
  const char* id;      // "B5"
  const char* title;   // "views share storage; clone copies"
  const char* source;  // "seeds 001 §6 and FAQ"
  const char* claim;   // the articles' claim, paraphrased
};

// Standard flags: --size (a scale factor for the tensors, 1 = the documented small default),
// --device, and --describe (prints "B5  views share storage; clone copies" and exits 0).
struct BehaviourFlags {
  int64_t size = 1;
  std::string device = "cpu";
  bool describe = false;
};

// A behaviour's flags beyond the standard ones, declared without CLI11: its header costs 5 s of
// compile time in every file that includes it, so only behaviour.cpp does.
class ExtraFlags {
 public:
  // --name N, an integer in [min, max].
  ExtraFlags& integer(const char* name, int64_t& value, const char* help, int64_t min, int64_t max);
  // --name N, an integer among `choices`.
  ExtraFlags& one_of(const char* name, int64_t& value, const char* help,
                     std::vector<int64_t> choices);
  // --name PATH.
  ExtraFlags& path(const char* name, std::string& value, const char* help);

  struct Flag {
    const char* name;
    const char* help;
    int64_t* integer = nullptr;       // an integer flag, checked against...
    std::vector<int64_t> range = {};  // ...{min, max}, or
    std::vector<int64_t> choices = {};
    std::string* path = nullptr;  // a path flag
  };
  const std::vector<Flag>& flags() const { return flags_; }

 private:
  std::vector<Flag> flags_;
};

// Handles --describe (returns true when the program should exit) and prints the header.
bool start_behaviour(const BehaviourInfo& info, const BehaviourFlags& flags);

// The exit status of a behaviour this build cannot run (B22 without Gloo), as a skipped test's:
// `./memgrad example all` counts it as skipped, not as a mismatch.
inline constexpr int kSkippedExitCode = 77;

// Prints "conclusion: <text>".
void print_conclusion(const std::string& text);

// cuBLAS's workspace. On a CUDA device the first matrix product on a stream allocates cuBLAS's
// workspace (cuda::cublas_workspace_size(), 32 MiB on Hopper, as in PyTorch) through the device's
// caching allocator and keeps it until cuda::clear_cublas_workspaces(); PyTorch's
// memory_allocated() shows the same jump at its first matmul. A behaviour that reads allocated
// bytes around matrix products calls this before its baseline: it runs one 1x1 product on
// `device` and prints the workspace's bytes, expected vs measured (nothing on cpu, sim and meta,
// which have none). Returns whether the bytes taken were the workspace's, exactly.
bool take_cublas_workspace(Device device);

// The bytes of that workspace on `device` as the allocator hands them out (0 on cpu, sim, meta).
int64_t cublas_workspace_bytes(Device device);

// Parses the standard flags and `extra`, then runs `body`, turning memgrad errors into a message
// and exit status 1 (for main()).
int run_behaviour(int argc, char** argv, const BehaviourInfo& info,
                  int (*body)(const BehaviourFlags& flags), const ExtraFlags& extra = {});

}  // namespace memgrad::examples
