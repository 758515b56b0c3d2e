// The device registry: one memory source and one allocator per device, created on first use.
//
// The registry is never destroyed: tensors with static lifetime may free their blocks after
// main returns, so allocators (and their sources) must outlive everything. For the same reason a
// replaced allocator is kept: blocks allocated from it are still freed into it.
//
// With MEMGRAD_TRACE set, every allocator the registry creates records its trace from the start,
// and an atexit handler writes each device's current allocator's trace as JSON when the program
// exits (what `./memgrad lab record` runs programs with).
#include "engine/memory.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/error.h"
#include "allocator/host_memory.h"
#include "allocator/summary.h"
#include "base/atomic_file.h"
#include "engine/device_backend.h"
#include "engine/error.h"
#include "engine/storage.h"
#include "engine/tensor.h"
#include "interop/memory_snapshot.h"
#include "interop/trace_writer.h"
#include "lab/policy_registry.h"

namespace memgrad {
namespace {

constexpr int kMaxDeviceIndex = Device::kMaxIndex + 1;
constexpr int kNumSlots = 1 + 3 * kMaxDeviceIndex;  // cpu, sim:0..63, cuda:0..63, meta:0..63
constexpr size_t kDefaultSimCapacity = 1 * kGiB;
constexpr size_t kDefaultMetaCapacity = 80 * kGiB;  // an 80 GiB GPU

struct Registry {
  std::mutex mutex;
  std::array<std::atomic<PolicyAllocator*>, kNumSlots> slots{};
  std::vector<std::unique_ptr<MemorySource>> sources;        // kept for the life of the process
  std::vector<std::unique_ptr<PolicyAllocator>> allocators;  // likewise, including replaced ones
  struct Installed {
    int slot;
    AllocatorConfig config;  // the options it was built with
  };
  std::vector<Installed> installed;  // allocators[i]'s slot and options
  std::array<AllocatorConfig, kNumSlots> configs{};
  std::array<bool, kNumSlots> configured{};
  size_t cpu_limit = 0;  // 0: host memory
  bool cpu_limit_read = false;
  std::array<size_t, kMaxDeviceIndex> sim_capacity{};
  std::array<size_t, kMaxDeviceIndex> meta_capacity{};
  std::optional<std::string> trace_path;     // MEMGRAD_TRACE, read once
  std::optional<std::string> snapshot_path;  // MEMGRAD_SNAPSHOT, read with it
  bool trace_path_read = false;
  bool trace_writer_registered = false;
};

Registry& registry() {
  static Registry* r = new Registry();  // immortal, see the file comment
  return *r;
}

int slot_of(Device d) {
  switch (d.type()) {
    case DeviceType::CPU: return 0;
    case DeviceType::Sim: return 1 + d.index();
    case DeviceType::CUDA: return 1 + kMaxDeviceIndex + d.index();
    case DeviceType::Meta: return 1 + 2 * kMaxDeviceIndex + d.index();
  }
  return 0;
}

size_t env_size(const char* var, size_t fallback) {
  const char* text = std::getenv(var);
  if (text == nullptr || *text == '\0') return fallback;
  return parse_memory_size(text, var);
}

// Requires r.mutex.
std::unique_ptr<MemorySource> make_source(Registry& r, Device d) {
  switch (d.type()) {
    case DeviceType::CPU:
      if (!r.cpu_limit_read) {
        r.cpu_limit = env_size("MEMGRAD_CPU_MEMORY_LIMIT", 0);
        r.cpu_limit_read = true;
      }
      if (r.cpu_limit > 0) return std::make_unique<BoundedMemory>(r.cpu_limit, "cpu");
      return std::make_unique<HostMemory>();
    case DeviceType::Sim: {
      size_t capacity = r.sim_capacity[static_cast<size_t>(d.index())];
      if (capacity == 0) capacity = env_size("MEMGRAD_SIM_MEMORY", kDefaultSimCapacity);
      return std::make_unique<BoundedMemory>(capacity, d.str());
    }
    case DeviceType::CUDA: return make_cuda_source(d.index());
    case DeviceType::Meta: {
      // The simulated device's source: a reserved address range, first fit by address, pages
      // never touched since no kernel writes a meta tensor. Same capacity, same addresses as
      // sim:N, so a meta run and a sim run of a program agree byte for byte.
      size_t capacity = r.meta_capacity[static_cast<size_t>(d.index())];
      if (capacity == 0) capacity = env_size("MEMGRAD_META_MEMORY", kDefaultMetaCapacity);
      return std::make_unique<BoundedMemory>(capacity, d.str());
    }
  }
  return nullptr;
}

// "t.json" -> "t.sim0.json": the trace file of one device when several are written.
std::string trace_file_for(const std::string& path, const std::string& device) {
  std::string tag;
  for (char c : device) {
    if (c != ':') tag.push_back(c);
  }
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return path + "." + tag;
  }
  return path.substr(0, dot) + "." + tag + path.substr(dot);
}

// At exit: each device's current allocator's trace, as JSON, each file written atomically.
// Errors cannot be thrown from here: a trace that cannot be written is reported on stderr and
// the process exits with kTraceWriteFailed, so no caller takes a missing trace for success.
constexpr int kTraceWriteFailed = 3;

// The snapshot device index of a registry slot: cpu 0, sim:N and cuda:N N.
int snapshot_index(int slot) {
  if (slot == 0) return 0;
  return (slot - 1) % kMaxDeviceIndex;
}

// The allocator whose snapshot stands for `slot` at exit: its current one, unless that recorded
// nothing and an allocator it replaced did (a program that measures several settings, each on
// a fresh allocator, and restores the device at the end); then the last of those. Its index in
// r.allocators, or -1 when the slot records nothing.
int snapshot_allocator(const Registry& r, int slot) {
  int current = -1, last_recorded = -1;
  for (size_t i = 0; i < r.allocators.size(); ++i) {
    if (r.installed[i].slot != slot || !r.allocators[i]->trace().enabled()) continue;
    const bool current_one =
        r.allocators[i].get() == r.slots[static_cast<size_t>(slot)].load(std::memory_order_acquire);
    if (current_one) current = static_cast<int>(i);
    if (!r.allocators[i]->trace().events().empty()) last_recorded = static_cast<int>(i);
  }
  if (current >= 0 && (!r.allocators[static_cast<size_t>(current)]->trace().events().empty() ||
                       last_recorded < 0)) {
    return current;
  }
  return last_recorded;
}

// At exit (MEMGRAD_SNAPSHOT): each recording device's snapshot, pickle or JSON by extension.
// Returns false when one could not be written (reported on stderr).
bool write_snapshots(Registry& r) {
  bool ok = true;
  std::vector<int> chosen;
  for (size_t s = 0; s < r.slots.size(); ++s) {
    if (const int i = snapshot_allocator(r, static_cast<int>(s)); i >= 0) chosen.push_back(i);
  }
  for (int i : chosen) {
    PolicyAllocator& a = *r.allocators[static_cast<size_t>(i)];
    const Registry::Installed& how = r.installed[static_cast<size_t>(i)];
    const std::string name = a.source().name();
    const std::string path =
        chosen.size() == 1 ? *r.snapshot_path : trace_file_for(*r.snapshot_path, name);
    try {
      write_snapshot_file(path, memory_snapshot(a, how.config, snapshot_index(how.slot)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[memgrad] error: MEMGRAD_SNAPSHOT: %s\n", e.what());
      ok = false;
      continue;
    }
    std::fprintf(stderr, "[memgrad] memory snapshot of %s (%zu events) written to %s\n",
                 name.c_str(), a.trace().size(), path.c_str());
  }
  return ok;
}

void write_traces() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  bool snapshots_ok = true;
  if (r.snapshot_path) snapshots_ok = write_snapshots(r);
  if (!r.trace_path) {
    if (!snapshots_ok) std::_Exit(kTraceWriteFailed);
    return;
  }
  std::vector<PolicyAllocator*> traced;
  for (const std::atomic<PolicyAllocator*>& slot : r.slots) {
    PolicyAllocator* a = slot.load(std::memory_order_acquire);
    if (a != nullptr && a->trace().enabled() && !a->trace().events().empty()) traced.push_back(a);
  }
  bool failed = false;
  for (PolicyAllocator* a : traced) {
    const MemorySource& source = a->source();
    const std::string path =
        traced.size() == 1 ? *r.trace_path : trace_file_for(*r.trace_path, source.name());
    try {
      write_file_atomically(
          path, trace_to_json(a->trace(), source.name(), a->policy_name(), source.capacity()));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[memgrad] error: MEMGRAD_TRACE: %s\n", e.what());
      failed = true;
      continue;
    }
    std::fprintf(stderr, "[memgrad] allocator trace of %s (%zu events) written to %s\n",
                 source.name().c_str(), a->trace().size(), path.c_str());
  }
  if (failed || !snapshots_ok) std::_Exit(kTraceWriteFailed);
}

// The path in the variable `name`, "{rank}" replaced by RANK (0 when unset); empty when unset.
std::optional<std::string> output_path(const char* name) {
  const char* path = std::getenv(name);
  if (path == nullptr || *path == '\0') return std::nullopt;
  const char* rank = std::getenv("RANK");
  std::string out = path;
  for (size_t at = out.find("{rank}"); at != std::string::npos; at = out.find("{rank}", at)) {
    out.replace(at, 6, rank != nullptr && *rank != '\0' ? rank : "0");
  }
  return out;
}

// Requires r.mutex. Switches tracing on for a new allocator when MEMGRAD_TRACE asks for it.
void maybe_trace(Registry& r, PolicyAllocator& allocator) {
  if (!r.trace_path_read) {
    r.trace_path = output_path("MEMGRAD_TRACE");
    r.snapshot_path = output_path("MEMGRAD_SNAPSHOT");
    r.trace_path_read = true;
  }
  if (!r.trace_path && !r.snapshot_path) return;
  allocator.trace().enable();
  if (!r.trace_writer_registered) {
    std::atexit(write_traces);
    r.trace_writer_registered = true;
  }
}

// Requires r.mutex. Builds a fresh source + allocator for `d` and publishes it.
PolicyAllocator& install(Registry& r, Device d) {
  const int slot = slot_of(d);
  if (!r.configured[static_cast<size_t>(slot)]) {
    AllocatorConfig config = AllocatorConfig::from_env();
    check_policy(config);  // a bad name is refused before it is kept
    r.configs[static_cast<size_t>(slot)] = std::move(config);
    r.configured[static_cast<size_t>(slot)] = true;
  }
  r.sources.push_back(make_source(r, d));
  r.allocators.push_back(make_allocator(r.configs[static_cast<size_t>(slot)], *r.sources.back()));
  r.installed.push_back({slot, r.configs[static_cast<size_t>(slot)]});
  PolicyAllocator* allocator = r.allocators.back().get();
  maybe_trace(r, *allocator);
  attach_device_hooks(d, *allocator);
  r.slots[static_cast<size_t>(slot)].store(allocator, std::memory_order_release);
  return *allocator;
}

}  // namespace

PolicyAllocator& allocator_for(Device device) {
  Registry& r = registry();
  PolicyAllocator* a =
      r.slots[static_cast<size_t>(slot_of(device))].load(std::memory_order_acquire);
  if (a != nullptr) [[likely]]
    return *a;
  if (device.is_cuda()) check_cuda_device(device.index());
  std::lock_guard<std::mutex> lock(r.mutex);
  a = r.slots[static_cast<size_t>(slot_of(device))].load(std::memory_order_acquire);
  return a != nullptr ? *a : install(r, device);
}

size_t memory_allocated(Device device) { return allocator_for(device).memory_allocated(); }
size_t memory_reserved(Device device) { return allocator_for(device).memory_reserved(); }
size_t max_memory_allocated(Device device) {
  return static_cast<size_t>(allocator_for(device).stats().allocated_bytes.all().peak);
}
size_t max_memory_reserved(Device device) {
  return static_cast<size_t>(allocator_for(device).stats().reserved_bytes.all().peak);
}
MemoryStats memory_stats(Device device) { return allocator_for(device).stats(); }
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak_stats(); }
void reset_accumulated_memory_stats(Device device) {
  allocator_for(device).reset_accumulated_stats();
}
void empty_cache(Device device) {
  PolicyAllocator& a = allocator_for(device);
  a.mark_in_trace(TraceAction::EmptyCache);  // a replay of the trace calls it at the same point
  a.empty_cache();
}

void name_in_trace(const Tensor& t, const char* module, std::string_view role) {
  if (!t.defined()) return;
  Storage& storage = t.storage();
  storage.set_trace_module(module);
  storage.allocator().name_in_trace(storage.data(), module, role);
}

std::string memory_summary(Device device, bool abbreviated) {
  PolicyAllocator& a = allocator_for(device);
  const FragmentationReport fragmentation = a.fragmentation();
  return memgrad::memory_summary(a.stats(), device.str(), a.policy_name(), abbreviated,
                                 &fragmentation);
}

std::pair<size_t, size_t> mem_get_info(Device device) {
  const MemorySource& s = allocator_for(device).source();
  return {s.free_bytes(), s.capacity()};
}

void set_per_process_memory_fraction(double fraction, Device device) {
  allocator_for(device).set_memory_fraction(fraction);
}

// Each setter changes registry settings and installs a fresh allocator built with them. When the
// install throws (a capacity no source can have, a missing device), the settings go back to what
// they were, so a rejected value does not resurface in a later install of the same device.

void set_allocator_config(Device device, const AllocatorConfig& config) {
  config.validate();
  check_policy(config);
  if (device.is_cuda()) check_cuda_device(device.index());
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto slot = static_cast<size_t>(slot_of(device));
  const AllocatorConfig previous = r.configs[slot];
  const bool was_configured = r.configured[slot];
  r.configs[slot] = config;
  r.configured[slot] = true;
  try {
    install(r, device);
  } catch (...) {
    r.configs[slot] = previous;
    r.configured[slot] = was_configured;
    throw;
  }
}

void set_cpu_memory_limit(size_t nbytes) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const size_t previous = r.cpu_limit;
  const bool was_read = r.cpu_limit_read;
  r.cpu_limit = nbytes;
  r.cpu_limit_read = true;
  try {
    install(r, kCPU);
  } catch (...) {
    r.cpu_limit = previous;
    r.cpu_limit_read = was_read;
    throw;
  }
}

namespace {

// Sets the capacity of sim:index or meta:index and installs a fresh allocator over it.
void set_capacity(DeviceType type, int index, size_t nbytes) {
  const Device device(type, index);  // throws DeviceError outside 0..63
  if (nbytes == 0) throw ConfigError(fmt::format("{}: capacity must be > 0 bytes", device.str()));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& table = type == DeviceType::Meta ? r.meta_capacity : r.sim_capacity;
  size_t& capacity = table[static_cast<size_t>(index)];
  const size_t previous = capacity;
  capacity = nbytes;
  try {
    install(r, device);
  } catch (...) {
    capacity = previous;
    throw;
  }
}

}  // namespace

void set_sim_capacity(int index, size_t nbytes) { set_capacity(DeviceType::Sim, index, nbytes); }

void set_meta_capacity(int index, size_t nbytes) { set_capacity(DeviceType::Meta, index, nbytes); }

void record_memory_history(Device device, size_t max_entries, bool enabled) {
  PolicyAllocator& a = allocator_for(device);
  if (enabled) {
    a.trace().enable(max_entries);
  } else {
    a.trace().disable();
  }
}

AllocatorConfig allocator_config(Device device) {
  allocator_for(device);  // the device exists and its options were read
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.configs[static_cast<size_t>(slot_of(device))];
}

FragmentationReport fragmentation(Device device) { return allocator_for(device).fragmentation(); }

}  // namespace memgrad
