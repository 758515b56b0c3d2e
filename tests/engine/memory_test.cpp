// The per-device memory API (engine/memory.h): what memory_allocated, memory_reserved, their
// peaks and memory_stats count, what the resets and empty_cache change, mem_get_info, the memory
// fraction, replacing a device's allocator or capacity, the environment variables read when an
// allocator is created, and the errors of each.
//
// Every figure is an exact byte count. The cases run on simulated devices no other engine test
// uses: sim:40 .. sim:50, each made fresh by fresh_sim (a new caching allocator of a given
// capacity, with zero statistics) so the numbers depend neither on the machine nor on
// MEMGRAD_ALLOC_CONF nor on earlier cases, and sim:51 .. sim:54, left untouched until the cases on
// the environment variables create them. The caching policy's rules (PyTorch's):
// blocks are multiples of 512 bytes; requests of at most 1 MiB come from 2 MiB small-pool
// segments, requests of 1 to 10 MiB from 20 MiB large-pool segments. A case that changes the CPU
// puts it back before it ends (CpuScope).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/config.h"
#include "allocator/error.h"
#include "allocator/host_memory.h"
#include "allocator/summary.h"
#include "engine/memgrad.h"
#include "memgrad_build_config.h"
#include "tests/support/error_check.h"
#include "tests/support/scoped_env.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_config_error;
using memgrad::testing::check_device_error;
using memgrad::testing::rounded;
using memgrad::testing::ScopedEnv;
using memgrad::testing::StatsDelta;

namespace {

constexpr size_t kSmallSegment = 2 * kMiB;   // small-pool segment
constexpr size_t kLargeSegment = 20 * kMiB;  // large-pool segment for 1-10 MiB requests

// sim:`index` with a fresh caching allocator of `capacity` bytes and zero statistics.
Device fresh_sim(int index, size_t capacity) {
  const Device device(DeviceType::Sim, index);
  set_allocator_config(device, AllocatorConfig{});
  set_sim_capacity(index, capacity);
  return device;
}

// A float32 tensor of `nbytes` bytes (a multiple of 4) on `device`.
Tensor bytes_on(Device device, size_t nbytes) {
  return empty({static_cast<int64_t>(nbytes / 4)}, TensorOptions(kFloat32).with_device(device));
}

// Puts the CPU back as the process started it when the scope ends: its capacity from
// MEMGRAD_CPU_MEMORY_LIMIT (host memory when unset) and its policy from MEMGRAD_ALLOC_CONF, with
// a fresh allocator, so later cases see the CPU they would have seen without this one.
class CpuScope {
 public:
  CpuScope() = default;
  ~CpuScope() {
    try {
      const char* limit = std::getenv("MEMGRAD_CPU_MEMORY_LIMIT");
      set_allocator_config(kCPU, AllocatorConfig::from_env());
      set_cpu_memory_limit(limit == nullptr || *limit == '\0'
                               ? 0
                               : parse_memory_size(limit, "MEMGRAD_CPU_MEMORY_LIMIT"));
    } catch (const std::exception& e) {
      FAIL_CHECK("the CPU could not be restored: " << e.what());
    }
  }
  CpuScope(const CpuScope&) = delete;
  CpuScope& operator=(const CpuScope&) = delete;
};

// The OutOfMemoryError `fn` throws; fails the case when it throws none.
template <typename Fn>
std::optional<OutOfMemoryError> oom_of(Fn fn) {
  try {
    fn();
  } catch (const OutOfMemoryError& e) {
    return e;
  }
  FAIL("no OutOfMemoryError");
  return std::nullopt;
}

}  // namespace

TEST_SUITE("engine") {

TEST_CASE("memory_allocated counts a live tensor's rounded block and memory_reserved its segment") {
  const Device dev = fresh_sim(40, 64 * kMiB);
  REQUIRE_EQ(memory_allocated(dev), 0);
  REQUIRE_EQ(memory_reserved(dev), 0);
  {
    const Tensor t = bytes_on(dev, 400);
    // 400 bytes -> one 512-byte block in a 2 MiB small-pool segment.
    CHECK_EQ(memory_allocated(dev), 512);
    CHECK_EQ(memory_reserved(dev), kSmallSegment);
    const MemoryStats s = memory_stats(dev);
    CHECK_EQ(s.allocated_bytes.all().current, 512);
    CHECK_EQ(s.allocated_bytes.small_pool().current, 512);
    CHECK_EQ(s.allocated_bytes.large_pool().current, 0);
    CHECK_EQ(s.requested_bytes.all().current, 400);
    CHECK_EQ(s.reserved_bytes.all().current, kSmallSegment);
    CHECK_EQ(s.allocation.all().current, 1);
    CHECK_EQ(s.segment.all().current, 1);
    {
      // 3 MiB -> a block of exactly 3 MiB in a 20 MiB large-pool segment.
      const Tensor big = bytes_on(dev, 3 * kMiB);
      CHECK_EQ(memory_allocated(dev), 512 + 3 * kMiB);
      CHECK_EQ(memory_reserved(dev), kSmallSegment + kLargeSegment);
      CHECK_EQ(memory_stats(dev).allocated_bytes.large_pool().current, 3 * kMiB);
    }
    CHECK_EQ(memory_allocated(dev), 512);
  }
  // The blocks are free again; the caching policy keeps both segments.
  CHECK_EQ(memory_allocated(dev), 0);
  CHECK_EQ(memory_reserved(dev), kSmallSegment + kLargeSegment);
  CHECK_EQ(memory_stats(dev).requested_bytes.all().current, 0);
}

TEST_CASE("a tensor with no elements allocates nothing") {
  const Device dev = fresh_sim(40, 64 * kMiB);
  const Tensor t = empty({0, 5}, TensorOptions(dev));
  CHECK_EQ(t.numel(), 0);
  CHECK_EQ(memory_allocated(dev), 0);
  CHECK_EQ(memory_reserved(dev), 0);
  CHECK_EQ(memory_stats(dev).allocation.all().allocated, 0);
}

TEST_CASE("max_memory_allocated keeps the peak until reset_peak_memory_stats sets it to now") {
  const Device dev = fresh_sim(41, 64 * kMiB);
  {
    const Tensor a = bytes_on(dev, 4096);
    { const Tensor b = bytes_on(dev, 8192); }
    CHECK_EQ(memory_allocated(dev), 4096);
    CHECK_EQ(max_memory_allocated(dev), 4096 + 8192);
    CHECK_EQ(memory_stats(dev).allocated_bytes.all().peak, 4096 + 8192);
    reset_peak_memory_stats(dev);
    CHECK_EQ(max_memory_allocated(dev), 4096);
    { const Tensor c = bytes_on(dev, 1024); }
    CHECK_EQ(max_memory_allocated(dev), 4096 + 1024);
  }
  CHECK_EQ(max_memory_allocated(dev), 4096 + 1024);
  reset_peak_memory_stats(dev);
  CHECK_EQ(max_memory_allocated(dev), 0);
}

TEST_CASE("max_memory_reserved keeps the peak after empty_cache until reset_peak_memory_stats") {
  const Device dev = fresh_sim(41, 64 * kMiB);
  { const Tensor big = bytes_on(dev, 2 * kMiB); }
  CHECK_EQ(memory_reserved(dev), kLargeSegment);
  empty_cache(dev);
  CHECK_EQ(memory_reserved(dev), 0);
  CHECK_EQ(max_memory_reserved(dev), kLargeSegment);
  reset_peak_memory_stats(dev);
  CHECK_EQ(max_memory_reserved(dev), 0);
}

TEST_CASE("empty_cache returns only the segments that hold no tensor") {
  const Device dev = fresh_sim(42, 64 * kMiB);
  const Tensor kept = bytes_on(dev, 512);
  {
    const Tensor big = bytes_on(dev, 3 * kMiB);
    const Tensor neighbour = bytes_on(dev, 1024);  // shares kept's small segment
  }
  REQUIRE_EQ(memory_reserved(dev), kSmallSegment + kLargeSegment);
  empty_cache(dev);
  // The large segment is empty and goes back; the small one still holds `kept`.
  CHECK_EQ(memory_allocated(dev), 512);
  CHECK_EQ(memory_reserved(dev), kSmallSegment);
  CHECK_EQ(memory_stats(dev).segment.all().current, 1);
  CHECK_EQ(memory_stats(dev).num_device_free, 1);
  CHECK_EQ(mem_get_info(dev).first, 64 * kMiB - kSmallSegment);
  // Allocated memory is never touched: `kept` is readable and writable.
  Tensor writable = kept;
  writable.fill_(3.0);
  CHECK_EQ(kept.sum().item<double>(), 3.0 * 128);
}

TEST_CASE("reset_accumulated_memory_stats zeroes totals and counters but keeps current and peak") {
  const Device dev = fresh_sim(43, 64 * kMiB);
  const Tensor kept = bytes_on(dev, 1024);
  { const Tensor gone = bytes_on(dev, 512); }
  MemoryStats s = memory_stats(dev);
  REQUIRE_EQ(s.allocated_bytes.all().allocated, 1024 + 512);
  REQUIRE_EQ(s.allocated_bytes.all().freed, 512);
  REQUIRE_EQ(s.allocation.all().allocated, 2);
  REQUIRE_EQ(s.num_device_alloc, 1);

  reset_accumulated_memory_stats(dev);
  s = memory_stats(dev);
  CHECK_EQ(s.allocated_bytes.all().allocated, 0);
  CHECK_EQ(s.allocated_bytes.all().freed, 0);
  CHECK_EQ(s.reserved_bytes.all().allocated, 0);
  CHECK_EQ(s.allocation.all().allocated, 0);
  CHECK_EQ(s.num_device_alloc, 0);
  // Current values and peaks are not totals.
  CHECK_EQ(s.allocated_bytes.all().current, 1024);
  CHECK_EQ(s.allocated_bytes.all().peak, 1024 + 512);
  CHECK_EQ(s.reserved_bytes.all().current, kSmallSegment);
  // Counting starts again from zero.
  { const Tensor again = bytes_on(dev, 2048); }
  CHECK_EQ(memory_stats(dev).allocated_bytes.all().allocated, 2048);
  CHECK_EQ(memory_stats(dev).allocated_bytes.all().freed, 2048);
}

TEST_CASE("mem_get_info of a simulated device is (capacity - reserved bytes, capacity)") {
  const size_t capacity = 8 * kMiB;
  const Device dev = fresh_sim(44, capacity);
  CHECK_EQ(mem_get_info(dev), std::pair<size_t, size_t>{capacity, capacity});
  {
    const Tensor t = bytes_on(dev, 4);
    CHECK_EQ(mem_get_info(dev), std::pair<size_t, size_t>{capacity - kSmallSegment, capacity});
  }
  // The freed block stays cached: the device still counts the segment as used.
  CHECK_EQ(mem_get_info(dev).first, capacity - kSmallSegment);
  empty_cache(dev);
  CHECK_EQ(mem_get_info(dev).first, capacity);
}

TEST_CASE("set_per_process_memory_fraction caps what the allocator reserves and the OOM says so") {
  const Device dev = fresh_sim(45, 64 * kMiB);
  set_per_process_memory_fraction(0.25, dev);  // 16 MiB allowed
  // A 3 MiB request needs a 20 MiB segment: above the 16 MiB allowed, though the device has room.
  const std::optional<OutOfMemoryError> e = oom_of([&] { (void)bytes_on(dev, 3 * kMiB); });
  REQUIRE(e.has_value());
  const OutOfMemoryInfo& info = e->info();
  CHECK_EQ(info.device, "sim:45");
  CHECK(info.fraction_set);
  CHECK_EQ(info.allowed, 16 * kMiB);
  CHECK_EQ(info.capacity, 64 * kMiB);
  CHECK_EQ(info.free, 64 * kMiB);
  CHECK_EQ(info.requested, 3 * kMiB);
  CHECK_EQ(info.alloc_size, kLargeSegment);
  CHECK_EQ(info.allocated, 0);
  CHECK_EQ(info.reserved, 0);
  CHECK(std::string(e->what()).find("16.00 MiB allowed") != std::string::npos);
  CHECK_EQ(memory_stats(dev).num_ooms, 1);
  // Small requests still fit in 2 MiB segments under the cap.
  const Tensor small = bytes_on(dev, 1024);
  CHECK_EQ(memory_reserved(dev), kSmallSegment);
  // The whole device again: the same request succeeds.
  set_per_process_memory_fraction(1.0, dev);
  const Tensor big = bytes_on(dev, 3 * kMiB);
  CHECK_EQ(memory_reserved(dev), kSmallSegment + kLargeSegment);
}

TEST_CASE("a memory fraction outside (0, 1] is a ConfigError that leaves the limit unchanged") {
  const Device dev = fresh_sim(45, 32 * kMiB);
  for (const double fraction : {0.0, -0.5, 1.5, std::nan(""), HUGE_VAL}) {
    CAPTURE(fraction);
    try {
      set_per_process_memory_fraction(fraction, dev);
      FAIL("no ConfigError");
    } catch (const ConfigError& e) {
      CHECK_EQ(e.key, "per_process_memory_fraction");
      CHECK(std::string(e.what()).find("fraction must be in (0, 1]") != std::string::npos);
    }
  }
  // No cap was set: a 20 MiB segment fits the 32 MiB device.
  const Tensor big = bytes_on(dev, 3 * kMiB);
  CHECK_EQ(memory_reserved(dev), kLargeSegment);
}

TEST_CASE("set_allocator_config replaces the allocator and older tensors free into the old one") {
  const Device dev = fresh_sim(46, 64 * kMiB);
  PolicyAllocator& old = allocator_for(dev);
  REQUIRE_EQ(old.policy_name(), "caching");
  Tensor before = bytes_on(dev, 400);
  before.fill_(2.0);
  REQUIRE_EQ(old.memory_allocated(), 512);

  AllocatorConfig passthrough;
  passthrough.policy = "passthrough";
  set_allocator_config(dev, passthrough);
  PolicyAllocator& now = allocator_for(dev);
  CHECK_NE(&now, &old);
  CHECK_EQ(now.policy_name(), "passthrough");
  CHECK_EQ(&allocator_for(dev), &now);  // the same allocator on every later call
  // The new allocator starts empty; the old one still holds `before`, whose values are intact.
  CHECK_EQ(memory_allocated(dev), 0);
  CHECK_EQ(memory_stats(dev).allocation.all().allocated, 0);
  CHECK_EQ(before.sum().item<double>(), 2.0 * 100);
  {
    const Tensor t = bytes_on(dev, 400);
    // Passthrough: the 512-byte block is its own segment, reserved == allocated.
    CHECK_EQ(memory_allocated(dev), 512);
    CHECK_EQ(memory_reserved(dev), 512);
  }
  CHECK_EQ(memory_reserved(dev), 0);
  const int64_t freed_by_now = now.stats().allocated_bytes.all().freed;
  before = Tensor();
  CHECK_EQ(old.memory_allocated(), 0);
  CHECK_EQ(now.stats().allocated_bytes.all().freed, freed_by_now);
}

TEST_CASE("an invalid allocator config is a ConfigError and the device keeps its allocator") {
  const Device dev = fresh_sim(46, 64 * kMiB);
  PolicyAllocator& before = allocator_for(dev);
  AllocatorConfig unknown;
  unknown.policy = "no_such_policy";
  check_config_error([&] { set_allocator_config(dev, unknown); }, "policy", "no_such_policy");
  AllocatorConfig fraction;
  fraction.memory_fraction = 0.0;
  CHECK_THROWS_WITH_AS(set_allocator_config(dev, fraction),
                       doctest::Contains("per_process_memory_fraction"), ConfigError);
  CHECK_EQ(&allocator_for(dev), &before);
  CHECK_EQ(allocator_for(dev).policy_name(), "caching");
}

TEST_CASE("set_sim_capacity gives the device a fresh allocator of that capacity") {
  const Device dev = fresh_sim(47, 64 * kMiB);
  const Tensor old = bytes_on(dev, 1024);
  set_sim_capacity(47, 4 * kMiB);
  CHECK_EQ(mem_get_info(dev), std::pair<size_t, size_t>{4 * kMiB, 4 * kMiB});
  CHECK_EQ(memory_allocated(dev), 0);
  CHECK_EQ(memory_reserved(dev), 0);
  CHECK_EQ(allocator_for(dev).policy_name(), "caching");  // the device's config is kept
  // 1 MiB requests come from the small pool: two per 2 MiB segment, two segments fit in 4 MiB.
  std::vector<Tensor> held;
  for (int i = 0; i < 4; ++i) held.push_back(bytes_on(dev, kMiB));
  CHECK_EQ(memory_reserved(dev), 2 * kSmallSegment);
  const std::optional<OutOfMemoryError> e = oom_of([&] { (void)bytes_on(dev, kMiB); });
  REQUIRE(e.has_value());
  CHECK_EQ(e->info().device, "sim:47");
  CHECK_FALSE(e->info().fraction_set);
  CHECK_EQ(e->info().capacity, 4 * kMiB);
  CHECK_EQ(e->info().free, 0);
  CHECK_EQ(e->info().requested, kMiB);
  CHECK_EQ(e->info().allocated, 4 * kMiB);
  CHECK_EQ(e->info().reserved, 4 * kMiB);
  CHECK_EQ(e->info().alloc_size, kSmallSegment);
  // A tensor of the replaced allocator is unaffected.
  CHECK_EQ(old.numel(), 256);
}

TEST_CASE(
    "a simulated capacity of 0 bytes or above the maximum is a ConfigError that changes "
    "nothing") {
  const Device dev = fresh_sim(48, 4 * kMiB);
  PolicyAllocator& before = allocator_for(dev);
  CHECK_THROWS_WITH_AS(set_sim_capacity(48, 0), doctest::Contains("sim:48: capacity must be > 0"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(set_sim_capacity(48, size_t{1} << 63),
                       doctest::Contains("more than a simulated device can have"), ConfigError);
  CHECK_EQ(&allocator_for(dev), &before);
  CHECK_EQ(mem_get_info(dev).second, 4 * kMiB);
  // A later fresh allocator for the device has the capacity the device had, not the rejected one.
  AllocatorConfig passthrough;
  passthrough.policy = "passthrough";
  CHECK_NOTHROW(set_allocator_config(dev, passthrough));
  CHECK_EQ(mem_get_info(dev).second, 4 * kMiB);
}

TEST_CASE("set_cpu_memory_limit makes the CPU a bounded device and 0 gives it host memory back") {
  CpuScope restore;
  Tensor before = full({1000}, 2.0f);
  PolicyAllocator& host_allocator = allocator_for(kCPU);
  const int64_t before_block = rounded(before.nbytes());
  REQUIRE_GE(host_allocator.memory_allocated(), static_cast<size_t>(before_block));

  set_allocator_config(kCPU, AllocatorConfig{});  // the caching policy, whatever the environment
  set_cpu_memory_limit(8 * kMiB);
  CHECK_NE(&allocator_for(kCPU), &host_allocator);
  CHECK_EQ(mem_get_info(kCPU), std::pair<size_t, size_t>{8 * kMiB, 8 * kMiB});
  CHECK_EQ(memory_allocated(), 0);
  {
    const Tensor t = zeros({256});
    CHECK_EQ(memory_allocated(), 1024);
    CHECK_EQ(memory_reserved(), kSmallSegment);
  }
  // A 3 MiB tensor needs a 20 MiB segment: more than the CPU now has.
  const std::optional<OutOfMemoryError> e = oom_of([] { (void)zeros({3 * kMiB / 4}); });
  REQUIRE(e.has_value());
  CHECK_EQ(e->info().device, "cpu");
  CHECK_EQ(e->info().capacity, 8 * kMiB);
  // The tensor made before is unaffected and frees into the allocator it came from.
  CHECK_EQ(before.sum().item<double>(), 2000.0);
  const size_t host_before_free = host_allocator.memory_allocated();
  before = Tensor();
  CHECK_EQ(host_allocator.memory_allocated(), host_before_free - static_cast<size_t>(before_block));

  set_cpu_memory_limit(0);
  CHECK_EQ(mem_get_info(kCPU).second, HostMemory().capacity());
  CHECK_EQ(memory_allocated(), 0);
  const Tensor big = zeros({3 * kMiB / 4});
  CHECK_EQ(memory_allocated(), 3 * kMiB);
}

TEST_CASE("a CPU memory limit above the maximum is a ConfigError that changes nothing") {
  CpuScope restore;
  set_cpu_memory_limit(8 * kMiB);
  PolicyAllocator& before = allocator_for(kCPU);
  CHECK_THROWS_WITH_AS(set_cpu_memory_limit(size_t{1} << 63),
                       doctest::Contains("more than a simulated device can have"), ConfigError);
  CHECK_EQ(&allocator_for(kCPU), &before);
  CHECK_EQ(mem_get_info(kCPU).second, 8 * kMiB);
  // A later fresh CPU allocator has the limit that was in force, not the rejected one.
  CHECK_NOTHROW(set_allocator_config(kCPU, AllocatorConfig{}));
  CHECK_EQ(mem_get_info(kCPU).second, 8 * kMiB);
}

TEST_CASE("the memory functions default to the CPU") {
  const Tensor t = zeros({300});
  PolicyAllocator& cpu = allocator_for(kCPU);
  CHECK_EQ(&allocator_for(Device("cpu")), &cpu);
  CHECK_EQ(memory_allocated(), cpu.memory_allocated());
  CHECK_EQ(memory_reserved(), cpu.memory_reserved());
  CHECK_EQ(max_memory_allocated(), static_cast<size_t>(cpu.stats().allocated_bytes.all().peak));
  CHECK_EQ(max_memory_reserved(), static_cast<size_t>(cpu.stats().reserved_bytes.all().peak));
  CHECK_EQ(memory_stats().num_device_alloc, cpu.stats().num_device_alloc);
  CHECK_EQ(mem_get_info().second, cpu.source().capacity());
  // And the delta of one tensor on the CPU is its rounded block.
  StatsDelta d(cpu);
  const Tensor u = zeros({300});
  CHECK_EQ(d.allocated(), rounded(1200));
}

TEST_CASE("each device has one allocator of its own, the same on every call") {
  const Device a = fresh_sim(49, 4 * kMiB);
  const Device b = fresh_sim(50, 4 * kMiB);
  PolicyAllocator& first = allocator_for(a);
  CHECK_EQ(&allocator_for(Device("sim:49")), &first);
  CHECK_NE(&allocator_for(b), &first);
  CHECK_NE(&allocator_for(kCPU), &first);
  // A tensor on one device counts only there.
  const Tensor t = bytes_on(a, 1024);
  CHECK_EQ(memory_allocated(a), 1024);
  CHECK_EQ(memory_allocated(b), 0);
  CHECK_EQ(allocator_for(a).source().name(), "sim:49");
}

TEST_CASE("memory_summary is the table of the device's statistics, named by device and policy") {
  const Device dev = fresh_sim(49, 64 * kMiB);
  const Tensor t = bytes_on(dev, 3 * kMiB);
  const std::string full_table = memory_summary(dev);
  const std::string short_table = memory_summary(dev, true);
  CHECK(full_table.find("memgrad memory summary, device sim:49 (caching)") != std::string::npos);
  CHECK(full_table.find("from large pool") != std::string::npos);
  CHECK(short_table.find("device sim:49 (caching)") != std::string::npos);
  CHECK(short_table.find("from large pool") == std::string::npos);
  // The same table allocator/summary.h prints for these statistics and this fragmentation.
  const FragmentationReport f = fragmentation(dev);
  CHECK_EQ(full_table, memgrad::memory_summary(memory_stats(dev), "sim:49", "caching", false, &f));
  CHECK_EQ(short_table, memgrad::memory_summary(memory_stats(dev), "sim:49", "caching", true, &f));
  // One 20 MiB segment holds the 3 MiB tensor: the other 17 MiB are fenced by it (hard).
  CHECK_EQ(f.reserved, 20 * kMiB);
  CHECK_EQ(f.hard, 17 * kMiB);
  CHECK_EQ(f.soft + f.stream, 0);
  CHECK(full_table.find("Hard fragmentation    |  17408 KiB") != std::string::npos);
  CHECK(full_table.find("Largest free block    |  17408 KiB") != std::string::npos);
  // It changes with the statistics.
  const Tensor u = bytes_on(dev, 1024);
  CHECK_NE(memory_summary(dev), full_table);
}

TEST_CASE("every memory function throws DeviceError for a CUDA device the build or machine lacks") {
  const int count = cuda_device_count();
#if !MEMGRAD_WITH_CUDA
  CHECK_EQ(count, 0);
#endif
  REQUIRE_LE(count, Device::kMaxIndex);
  const Device missing(DeviceType::CUDA, count);
  check_device_error([&] { allocator_for(missing); }, "device", {missing.str()});
  CHECK_THROWS_AS(memory_allocated(missing), DeviceError);
  CHECK_THROWS_AS(max_memory_allocated(missing), DeviceError);
  CHECK_THROWS_AS(memory_reserved(missing), DeviceError);
  CHECK_THROWS_AS(max_memory_reserved(missing), DeviceError);
  CHECK_THROWS_AS(memory_stats(missing), DeviceError);
  CHECK_THROWS_AS(reset_peak_memory_stats(missing), DeviceError);
  CHECK_THROWS_AS(reset_accumulated_memory_stats(missing), DeviceError);
  CHECK_THROWS_AS(empty_cache(missing), DeviceError);
  CHECK_THROWS_AS(memory_summary(missing), DeviceError);
  CHECK_THROWS_AS(mem_get_info(missing), DeviceError);
  CHECK_THROWS_AS(set_per_process_memory_fraction(0.5, missing), DeviceError);
  check_device_error([&] { set_allocator_config(missing, AllocatorConfig{}); }, "device",
                     {missing.str()});
  // Still missing afterwards: no failed call left an allocator behind.
  CHECK_THROWS_AS(allocator_for(missing), DeviceError);
}

TEST_CASE("MEMGRAD_SIM_MEMORY sets the capacity of a simulated device created while it is set") {
  {
    const ScopedEnv env("MEMGRAD_SIM_MEMORY", "3MiB");
    CHECK_EQ(mem_get_info(Device(DeviceType::Sim, 51)).second, 3 * kMiB);
    // set_sim_capacity wins over the variable.
    set_sim_capacity(51, 5 * kMiB);
    CHECK_EQ(mem_get_info(Device(DeviceType::Sim, 51)).second, 5 * kMiB);
  }
  {
    const ScopedEnv env("MEMGRAD_SIM_MEMORY", "lots");
    CHECK_THROWS_WITH_AS(allocator_for(Device(DeviceType::Sim, 52)),
                         doctest::Contains("MEMGRAD_SIM_MEMORY"), ConfigError);
  }
  // Without the variable the device is created with the default 1 GiB.
  const ScopedEnv unset("MEMGRAD_SIM_MEMORY", nullptr);
  CHECK_EQ(mem_get_info(Device(DeviceType::Sim, 52)).second, kGiB);
}

TEST_CASE("MEMGRAD_ALLOC_CONF chooses the policy of an allocator created while it is set") {
  {
    const ScopedEnv env("MEMGRAD_ALLOC_CONF", "policy:passthrough");
    CHECK_EQ(allocator_for(Device(DeviceType::Sim, 53)).policy_name(), "passthrough");
  }
  {
    const ScopedEnv env("MEMGRAD_ALLOC_CONF", "policy:nope");
    check_config_error([] { allocator_for(Device(DeviceType::Sim, 54)); }, "policy", "nope");
  }
  const ScopedEnv unset("MEMGRAD_ALLOC_CONF", nullptr);
  CHECK_EQ(allocator_for(Device(DeviceType::Sim, 54)).policy_name(), "caching");
  // A device keeps the config it was created with when it is given a new capacity.
  set_sim_capacity(53, 4 * kMiB);
  CHECK_EQ(allocator_for(Device(DeviceType::Sim, 53)).policy_name(), "passthrough");
}

}  // TEST_SUITE("engine")
