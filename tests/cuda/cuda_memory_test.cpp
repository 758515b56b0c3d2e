// CUDA memory behaviour: allocations belong to the current stream, a block freed on one stream is
// not reused on another, record_stream defers reuse until the other stream's work has run, the
// pinned host allocator's rounding and reuse, asynchronous copies from pinned memory, errors for
// cross-device ops and out-of-memory with the device's real capacity, and the cuBLAS workspace
// in the memory statistics.
//
// To make "still in use by a stream" deterministic, a stream is held busy by a host function
// that waits for a flag (cudaLaunchHostFunc); everything that could need a new segment or a new
// pinned block is allocated before the stream is blocked, so no CUDA call waits on it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <cuda_runtime_api.h>

#include "allocator/cuda_check.h"
#include "allocator/cuda_memory.h"
#include "engine/data/data_loader.h"
#include "kernels/cuda/cuda_handles.h"
#include "lab/policies/expandable_allocator.h"
#include "tests/cuda/cuda_twin.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::check_device_error;
using namespace memgrad::testing;

namespace {

// Holds `stream` of cuda:0 busy until release() (or destruction).
class StreamBlocker {
 public:
  explicit StreamBlocker(StreamId stream) {
    cudaStream_t handle = kernels::cuda::stream_handle(0, stream);
    REQUIRE_EQ(cudaLaunchHostFunc(handle, &wait_for, &released_), cudaSuccess);
  }
  ~StreamBlocker() { release(); }
  void release() { released_.store(true); }

 private:
  static void wait_for(void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  }
  std::atomic<bool> released_{false};
};

// Sets the memory fraction of cuda:0 for its scope.
class FractionScope {
 public:
  explicit FractionScope(double fraction) { set_per_process_memory_fraction(fraction, kCuda0); }
  ~FractionScope() { set_per_process_memory_fraction(1.0, kCuda0); }
};

}  // namespace

TEST_SUITE("cuda") {

TEST_CASE("device properties describe a real GPU") {
  const cuda::DeviceProperties p = cuda::get_device_properties(0);
  CHECK_FALSE(p.name.empty());
  CHECK_GT(p.total_memory, size_t{0});
  CHECK_GT(p.multi_processor_count, 0);
  CHECK_GE(p.major, 8);  // built for sm_80 and sm_90
  CHECK_GE(cuda::device_count(), 1);
}

TEST_CASE("CUDA tensors are allocated on the current stream") {
  const StreamId s = cuda::new_stream(0);
  Tensor t;
  {
    cuda::StreamGuard guard(s);
    CHECK_EQ(cuda::current_stream(0), s);
    t = empty({1000}, kCuda0);
  }
  CHECK_EQ(cuda::current_stream(0), kDefaultStream);
  CHECK_EQ(t.storage().block().stream, s);
  bool found = false;
  const uint64_t address = reinterpret_cast<uintptr_t>(t.data_ptr());
  for (const SegmentSnapshot& seg : allocator_for(kCuda0).snapshot()) {
    if (address >= seg.address && address < seg.address + seg.nbytes) found = seg.stream == s;
  }
  CHECK(found);
}

TEST_CASE("a block freed on one stream is not reused on another") {
  const StreamId a = cuda::new_stream(0), b = cuda::new_stream(0);
  void* first = nullptr;
  {
    cuda::StreamGuard guard(a);
    const Tensor x = empty({1024}, kCuda0);
    first = x.data_ptr();
  }
  {
    cuda::StreamGuard guard(b);
    const Tensor y = empty({1024}, kCuda0);
    CHECK_NE(y.data_ptr(), first);
  }
  cuda::StreamGuard guard(a);
  const Tensor z = empty({1024}, kCuda0);
  CHECK_EQ(z.data_ptr(), first);
}

TEST_CASE("record_stream defers reuse of a freed block until the stream's work has run") {
  const StreamId s = cuda::new_stream(0);
  {
    const Tensor warm = empty({4 * 1024}, kCuda0);  // a small-pool segment exists from here on
  }
  Tensor x = empty({1024}, kCuda0);
  void* ptr = x.data_ptr();
  StatsDelta d(allocator_for(kCuda0));
  StreamBlocker blocker(s);
  cuda::record_stream(x, s);
  x = Tensor();
  // Freed by its tensor (allocated drops) but still active: an event on s guards it.
  CHECK_EQ(d.allocated(), -rounded(4096));
  CHECK_EQ(memory_stats(kCuda0).active_bytes.all().current -
               static_cast<int64_t>(memory_allocated(kCuda0)),
           rounded(4096));
  const Tensor y = empty({1024}, kCuda0);
  CHECK_NE(y.data_ptr(), ptr);
  blocker.release();
  cuda::synchronize_stream(s, 0);
  const Tensor z = empty({1024}, kCuda0);  // the event has completed: the block is reused
  CHECK_EQ(z.data_ptr(), ptr);
}

TEST_CASE("record_stream refuses a stream that is not one of the tensor's device's") {
  Tensor x = empty({1024}, kCuda0);
  const StreamId before = cuda::current_stream(0);
  CHECK_THROWS_AS(cuda::record_stream(x, StreamId{1000000}), CudaError);
  CHECK_EQ(cuda::current_stream(0), before);
  x = Tensor();  // freed at once: nothing was recorded on the refused stream
}

TEST_CASE("the pinned allocator rounds to powers of two and reuses freed blocks") {
  cuda::host_empty_cache();
  const MemoryStats before = cuda::host_memory_stats();
  void* first = nullptr;
  {
    const Tensor p = pin_memory(empty({250}));  // 1000 bytes -> a 1024-byte block
    CHECK(p.is_pinned());
    CHECK_FALSE(empty({250}).is_pinned());
    const MemoryStats s = cuda::host_memory_stats();
    CHECK_EQ(s.allocated_bytes.all().current - before.allocated_bytes.all().current, 1024);
    CHECK_EQ(s.reserved_bytes.all().current - before.reserved_bytes.all().current, 1024);
    CHECK_EQ(s.segment.all().current - before.segment.all().current, 1);
    first = p.data_ptr();
  }
  const MemoryStats freed = cuda::host_memory_stats();
  CHECK_EQ(freed.allocated_bytes.all().current, before.allocated_bytes.all().current);
  CHECK_EQ(freed.reserved_bytes.all().current - before.reserved_bytes.all().current, 1024);
  {
    const Tensor q = pin_memory(empty({200}));  // 800 bytes: the same size class
    CHECK_EQ(q.data_ptr(), first);
    CHECK_EQ(cuda::host_memory_stats().num_device_alloc, freed.num_device_alloc);
    const Tensor big = pin_memory(empty({300}));  // 1200 bytes -> 2048, a new block
    CHECK_EQ(cuda::host_memory_stats().reserved_bytes.all().current -
                 before.reserved_bytes.all().current,
             1024 + 2048);
  }
  cuda::host_empty_cache();
  CHECK_EQ(cuda::host_memory_stats().reserved_bytes.all().current,
           before.reserved_bytes.all().current);
}

TEST_CASE("an asynchronous copy from pinned memory keeps its source block until it has run") {
  const int64_t n = 4096;
  Tensor spare = pin_memory(empty({n}));
  void* spare_ptr = spare.data_ptr();
  Tensor host = pin_memory(arange(0, n, 1, kFloat32));
  Tensor dev = empty({n}, kCuda0);
  spare = Tensor();  // back on its free list: no new cudaHostAlloc below
  StreamBlocker blocker(kDefaultStream);
  copy_(dev, host, /*non_blocking=*/true);  // queued behind the blocker
  void* src_ptr = host.data_ptr();
  host = Tensor();
  const Tensor other = pin_memory(empty({n}));
  CHECK_NE(other.data_ptr(), src_ptr);  // the copy may still read it
  CHECK_EQ(other.data_ptr(), spare_ptr);
  blocker.release();
  cuda::synchronize(0);
  check_values(dev, {n}, arange(0, n, 1, kFloat64).to_vector<double>());
  const Tensor again = pin_memory(empty({n}));
  CHECK_EQ(again.data_ptr(), src_ptr);
}

TEST_CASE("the DataLoader refills a pinned staging buffer only after the copy out of it ran") {
  // Items of 256 distinct floats, one per batch, staged through the loader's two pinned buffers.
  // The second batch's copy to cuda:0 is queued behind a blocked stream, so refilling the
  // buffers for the third batch must wait for it: without that wait the second batch would
  // reach the device holding the third's bytes. The first batch makes the staging buffers and
  // the device blocks the later batches reuse, so no allocation meets the blocked stream.
  const int64_t n = 256;
  const data::TensorDataset dataset(arange(0, 4 * n, 1, kFloat32).view({4, n}),
                                    arange(0, 4, 1, kInt64));
  data::DataLoader loader(dataset, {.batch_size = 1, .prefetch = 0, .device = kCuda0});
  REQUIRE(loader.next().has_value());
  cuda::synchronize(0);
  std::optional<data::Example> second, third;
  double waited_s = 0.0;
  {
    StreamBlocker blocker(kDefaultStream);
    std::thread release([&blocker] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      blocker.release();
    });
    second = loader.next();
    const auto start = std::chrono::steady_clock::now();
    third = loader.next();
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    release.join();
  }
  cuda::synchronize(0);
  REQUIRE(second.has_value());
  REQUIRE(third.has_value());
  CHECK_GE(waited_s, 0.1);  // the third batch waited for the second one's copy
  check_values(second->input, {1, n}, arange(n, 2 * n, 1, kFloat64).to_vector<double>());
  check_values(third->input, {1, n}, arange(2 * n, 3 * n, 1, kFloat64).to_vector<double>());
  check_values(second->target, {1}, {1.0});
  check_values(third->target, {1}, {2.0});
  CHECK_EQ(loader.staging_allocations(), 2u);  // the two buffers of the first batch, reused
}

TEST_CASE("copies between host devices and cuda:0 round-trip every dtype") {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = random_tensor({17, 9}, dtype, -100, 100, 301);
    check_close(x, x.to(kCuda0), 0.0, 0.0, "cpu -> cuda");
    const Tensor sim = x.to(Device("sim:0"));
    check_values(sim.to(kCuda0).to(Device("sim:0")), {17, 9}, x.to_vector<double>(), 0.0);
    // A transposed source is made contiguous first; non_blocking from pageable memory is a
    // synchronous copy.
    check_close(x.t().contiguous(), x.t().to(kCuda0, /*non_blocking=*/true), 0.0, 0.0,
                "transposed");
  }
}

TEST_CASE("ops mixing cpu and cuda tensors raise DeviceError") {
  const Tensor a = ones({3});
  const Tensor b = ones({3}, kCuda0);
  check_device_error([&] { (void)(a + b); }, "add", {"cpu", "cuda:0"});
  check_device_error(
      [&] {
        (void)matmul(ones({2, 2}), ones({2, 2}, kCuda0));
      },
      "matmul", {"cpu", "cuda:0"});
  check_device_error([&] { (void)pin_memory(b); }, "pin_memory", {"cuda:0"});
  check_device_error([&] { cuda::record_stream(a, kDefaultStream); }, "record_stream", {"cpu"});
  const int count = cuda::device_count();
  const Device missing(DeviceType::CUDA, count);
  CHECK_THROWS_WITH_AS(ones({1}, missing), doctest::Contains("requested"), DeviceError);
}

TEST_CASE("out of memory names the device's real capacity") {
  const auto [free_bytes, total] = mem_get_info(kCuda0);
  CHECK_GT(free_bytes, size_t{0});
  FractionScope scope(0.01);
  try {
    const Tensor big = empty({static_cast<int64_t>(total / 50)}, kCuda0);  // 8% of the device
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    CHECK_EQ(e.info().device, "cuda:0");
    CHECK_EQ(e.info().capacity, total);
    CHECK(e.info().fraction_set);
    CHECK_EQ(e.info().allowed, static_cast<size_t>(0.01 * static_cast<double>(total)));
    CHECK(std::string(e.what()).find(format_size(total)) != std::string::npos);
  }
}

TEST_CASE("the cuBLAS workspace comes from the device allocator and shows in its stats") {
  const size_t ws = cuda::cublas_workspace_size(0);
  CHECK_GT(ws, size_t{0});
  const StreamId s = cuda::new_stream(0);
  StatsDelta d(allocator_for(kCuda0));
  {
    cuda::StreamGuard guard(s);
    const Tensor a = ones({64, 64}, kCuda0), b = ones({64, 64}, kCuda0);
    const int64_t inputs = 2 * rounded(64 * 64 * 4);
    {
      // The first product on stream s takes its workspace: result + workspace.
      const Tensor c = matmul(a, b);
      CHECK_EQ(d.allocated() - inputs, rounded(64 * 64 * 4) + rounded(ws));
      check_values(c.select(0, 0).slice(0, 0, 2), {2}, {64, 64});
    }
    {
      const Tensor c = matmul(a, b);  // the workspace stays: only the result now
      CHECK_EQ(d.allocated() - inputs, rounded(64 * 64 * 4) + rounded(ws));
    }
    CHECK_EQ(d.allocated() - inputs, rounded(ws));
  }
  // Clearing returns every stream's workspace: s's and the default stream's (taken before the
  // snapshot, by the suite's warm-up).
  cuda::clear_cublas_workspaces(0);
  CHECK_EQ(d.allocated(), -rounded(ws));
  (void)matmul(ones({2, 2}, kCuda0), ones({2, 2}, kCuda0));  // restore the default stream's
  CHECK_EQ(d.allocated(), 0);
}

TEST_CASE("the expandable policy grows one CUDA segment in place with virtual memory mapping") {
  CudaMemory source(0);
  if (!source.supports_expansion()) {
    MESSAGE("cuda:0 has no virtual memory management: the expandable policy refuses it");
    CHECK_THROWS_AS(ExpandableAllocator{source}, ConfigError);
    return;
  }
  CHECK_EQ(kSmallBuffer % source.expansion_page_nbytes(), size_t{0});
  ExpandableAllocator alloc(source);
  // Three 8 MiB requests: the first maps one 20 MiB page, the third grows the same range.
  const Block a = alloc.allocate(8 * kMiB), b = alloc.allocate(8 * kMiB);
  const Block c = alloc.allocate(8 * kMiB);
  CHECK_EQ(alloc.memory_reserved(), 2 * ExpandableAllocator::kLargePage);
  CHECK_EQ(static_cast<char*>(b.ptr) - static_cast<char*>(a.ptr), 8 * static_cast<int64_t>(kMiB));
  CHECK_EQ(static_cast<char*>(c.ptr) - static_cast<char*>(b.ptr), 8 * static_cast<int64_t>(kMiB));
  CHECK_EQ(alloc.snapshot().size(), size_t{1});  // one contiguous mapped range
  // The mapped pages are real device memory: write and read them back.
  REQUIRE_EQ(cudaMemset(c.ptr, 0x5a, 8 * kMiB), cudaSuccess);
  unsigned char last = 0;
  REQUIRE_EQ(cudaMemcpy(&last, static_cast<char*>(c.ptr) + 8 * kMiB - 1, 1, cudaMemcpyDeviceToHost),
             cudaSuccess);
  CHECK_EQ(last, 0x5a);
  alloc.free(a);
  alloc.free(b);
  alloc.free(c);
  alloc.empty_cache();
  CHECK_EQ(alloc.memory_reserved(), size_t{0});
}

}  // TEST_SUITE("cuda")
