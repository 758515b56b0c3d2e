// B20 -- profiling memory over time (seed 001 §7, seed 003 §10).
//
// The device allocator's trace is switched on for one training step. Every alloc, free and
// segment event is stored with the allocated and reserved totals after it and the context it
// happened in: the phase (the program labels data and forward with TracePhaseScope; autograd
// labels backward, the optimizer its step) and the op. The trace is written as JSON that
// Perfetto and chrome://tracing open (counter tracks for allocated and reserved, one slice per
// phase) and as an SVG timeline with the phases shaded and the largest blocks at the peak
// listed. The program prints counts and bytes only (times vary from run to run), and checks the
// files against the allocator: the JSON parses and its allocated track ends at
// memory_allocated().
//
//   ./memgrad example b20 [--size N] [--device sim:0] [--out DIR]
#include "examples/behaviours/b20_memory_timeline.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "base/atomic_file.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"
#include "interop/trace_svg.h"
#include "interop/trace_writer.h"

namespace memgrad::examples {
namespace {

constexpr int64_t kInputs = 128;
constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 64;

void count(std::vector<std::pair<std::string, int64_t>>& counts, const std::string& key) {
  auto it =
      std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == key; });
  if (it == counts.end()) {
    counts.emplace_back(key, 1);
  } else {
    ++it->second;
  }
}

// Fills the counts, the peak and the JSON check of `r` from the recorder.
void summarise(const TraceRecorder& recorder, TimelineResult& r) {
  const std::vector<TraceEvent> events = recorder.events();
  const std::vector<TraceContextRecord> contexts = recorder.contexts();
  r.events = static_cast<int64_t>(events.size());
  for (const TraceEvent& e : events) {
    count(r.per_phase, contexts[e.context].phase);
    count(r.per_action, std::string(trace_action_name(e.action)));
    if (e.allocated > r.trace_peak) {
      r.trace_peak = e.allocated;
      r.peak_phase = contexts[e.context].phase;
      r.peak_op = contexts[e.context].op;
    }
  }
  const nlohmann::json doc = nlohmann::json::parse(r.json, nullptr, /*allow_exceptions=*/false);
  r.json_parses = !doc.is_discarded() && doc.contains("traceEvents");
  if (!r.json_parses) return;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "C" && e.contains("args") && e["args"].contains("allocated")) {
      ++r.counter_samples;
      r.last_counter_allocated = e["args"]["allocated"].get<int64_t>();
    }
  }
}

}  // namespace

TimelineResult record_training_step(int64_t size, Device device) {
  TimelineResult r;
  const int64_t hidden = 256 * size;
  const nn::LinearOptions o{true, device, kFloat32};
  nn::Sequential model({std::make_shared<nn::Linear>(kInputs, hidden, o),
                        std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(hidden, kClasses, o)});
  optim::Adam optimizer(model.parameters(), {.lr = 1e-3});
  {
    // One untraced no-grad forward first, so that one-time start-up work (the thread pools of
    // OpenMP and BLAS) does not stretch the timeline; it changes no state.
    NoGradGuard no_grad;
    model.forward(zeros({kBatch, kInputs}, TensorOptions(kFloat32).with_device(device)));
  }
  PolicyAllocator& allocator = allocator_for(device);
  reset_peak_memory_stats(device);
  // Under MEMGRAD_TRACE or MEMGRAD_SNAPSHOT the trace is already on: it restarts here and stays
  // on, so that the file written at exit holds this step and what follows.
  const bool traced_at_exit = allocator.trace().enabled();
  allocator.trace().enable();
  Tensor x, y;
  {
    TracePhaseScope phase("data");
    Generator g(20);
    x = randn({kBatch, kInputs}, TensorOptions(kFloat32).with_device(device), &g);
    y = randint(0, kClasses, {kBatch}, TensorOptions(kInt64).with_device(device), &g);
  }
  {
    Tensor loss;
    {
      TracePhaseScope phase("forward");
      loss = nn::cross_entropy(model.forward(x), y);
    }
    loss.backward();  // phase "backward", set by autograd
  }
  optimizer.step();  // phase "optimizer", set by the optimizer
  {
    TracePhaseScope phase("zero_grad");
    optimizer.zero_grad();
  }
  if (!traced_at_exit) allocator.trace().disable();
  r.memory_allocated_at_end = static_cast<int64_t>(memory_allocated(device));
  r.stats_peak = static_cast<int64_t>(max_memory_allocated(device));
  const std::string policy(allocator.policy_name());
  const size_t capacity = mem_get_info(device).second;
  r.json = trace_to_json(allocator.trace(), device.str(), policy, capacity);
  r.svg = trace_to_svg(allocator.trace().events(), allocator.trace().contexts(),
                       fmt::format("memgrad: one training step of an MLP on {}", device.str()),
                       capacity);
  summarise(allocator.trace(), r);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B20", "profiling memory over time", "seeds 001 (section 7) and 003 (section 10)",
    "Memory profiling tools show how much memory is in use over time and which operations use "
    "it, which is how memory bottlenecks are found."};

std::string g_out_dir = "./memgrad-trace";

void write_file(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path.string(), text);
}

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const TimelineResult r = record_training_step(flags.size, device);
  std::error_code error;
  std::filesystem::create_directories(g_out_dir, error);
  if (error) {
    throw ValueError(fmt::format("[b20] cannot create '{}': {}", g_out_dir, error.message()), "b20",
                     "out_dir", g_out_dir);
  }
  const std::filesystem::path dir(g_out_dir);
  write_file(dir / "memory-trace.json", r.json);
  write_file(dir / "memory-timeline.svg", r.svg);

  fmt::print("one training step of an MLP {}-{}-{} (Adam, batch {}) on {}: {} allocator events\n",
             kInputs, 256 * flags.size, kClasses, kBatch, device.str(), r.events);
  fmt::print("\n  events per phase:\n");
  for (const auto& [phase, n] : r.per_phase) {
    fmt::print("    {:<12} {:>5}\n", phase.empty() ? "(no phase)" : phase, n);
  }
  fmt::print("\n  events per action:\n");
  for (const auto& [action, n] : r.per_action) {
    fmt::print("    {:<15} {:>5}\n", action, n);
  }
  fmt::print("\n");
  MemoryReport report("Checks of the recorded trace against the allocator's own statistics:");
  report.add("peak in the trace = max_memory_allocated()", r.stats_peak, r.trace_peak);
  report.add("JSON allocated track ends at memory_allocated()", r.memory_allocated_at_end,
             r.last_counter_allocated);
  report.print();
  fmt::print("\nJSON parses: {}; {} counter samples (one per event)\n",
             r.json_parses ? "yes" : "NO", r.counter_samples);
  fmt::print("wrote {}/memory-trace.json (open in https://ui.perfetto.dev or chrome://tracing)\n",
             g_out_dir);
  fmt::print("wrote {}/memory-timeline.svg (open in a browser)\n", g_out_dir);
  fmt::print("the peak was reached in phase '{}' by op '{}'\n", r.peak_phase, r.peak_op);
  const bool ok = r.json_parses && r.counter_samples == r.events;
  const auto phases = std::count_if(r.per_phase.begin(), r.per_phase.end(),
                                    [](const auto& p) { return !p.first.empty(); });
  print_conclusion(fmt::format(
      "the step's {} events, labelled with {} phases, peak at {} allocated in the trace as in the "
      "allocator's statistics, and the exported counter track ends where memory_allocated() "
      "does ({}).",
      r.events, phases, human_bytes(r.trace_peak), human_bytes(r.memory_allocated_at_end)));
  return report.all_match() && ok ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b20_memory_timeline_main() is its main() (a generated file calls it).
int b20_memory_timeline_main(int argc, char** argv) {
  ExtraFlags extra;
  extra.path("--out", g_out_dir, "Directory for memory-trace.json and memory-timeline.svg");
  return run_behaviour(argc, argv, kInfo, body, extra);
}

}  // namespace memgrad::examples
