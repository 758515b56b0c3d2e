// Device state for the CUDA backend: device count and properties, streams by id, the stream
// events of record_stream, the cuBLAS handle and workspaces, the index-check word.
//
// The registry is never destroyed (like the allocator registry): blocks, events and handles
// may still be released while static objects are torn down after main returns, and by then the
// CUDA runtime itself may be unloading, so no CUDA call is made at exit.
#include "kernels/cuda/device_context.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/cuda_handles.h"

namespace memgrad::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;
// Stream ids below this; the bits above hold the device in host_stream_key.
constexpr int kDeviceShift = 56;
constexpr StreamId kStreamMask = (StreamId{1} << kDeviceShift) - 1;

// record_stream's events on one device's streams (timing disabled: cheaper to record).
class DeviceStreamEvents final : public StreamEvents {
 public:
  explicit DeviceStreamEvents(int device) : device_(device) {}
  void* record(StreamId stream) override {
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    MEMGRAD_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    MEMGRAD_CUDA_CHECK(cudaEventRecord(event, stream_handle(device_, stream)));
    return event;
  }
  bool query(void* event) override {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, "cudaEventQuery(event)");
    return true;
  }
  void synchronize(void* event) override {
    MEMGRAD_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }
  void release(void* event) override {
    MEMGRAD_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
  }

 private:
  int device_;
};

// Events for the pinned host allocator: keys name (device, stream).
class HostStreamEvents final : public StreamEvents {
 public:
  void* record(StreamId key) override;
  bool query(void* event) override { return stream_events(0).query(event); }
  void synchronize(void* event) override { stream_events(0).synchronize(event); }
  void release(void* event) override { stream_events(0).release(event); }
};

// A cuBLAS workspace and the allocator it came from.
struct Workspace {
  Block block;
  PolicyAllocator* allocator = nullptr;
};

struct DeviceState {
  explicit DeviceState(int device) : events(device) {}
  DeviceStreamEvents events;
  std::once_flag properties_once;
  DeviceProperties properties;
  std::mutex blas_mutex;  // guards everything below up to the index word
  cublasHandle_t blas = nullptr;
  PolicyAllocator* workspace_allocator = nullptr;
  std::map<StreamId, Workspace> workspaces;
  std::mutex index_mutex;
  unsigned long long* index_word = nullptr;
};

struct Registry {
  std::mutex mutex;
  std::array<std::unique_ptr<DeviceState>, kMaxDevices> devices;
  std::vector<std::pair<int, cudaStream_t>> streams;  // id n > 0 is streams[n - 1]
  HostStreamEvents host_events;
  std::atomic<bool> allow_tf32{false};
};

Registry& registry() {
  static Registry* r = new Registry();  // immortal, see the file comment
  return *r;
}

DeviceState& state(int device) {
  if (device < 0 || device >= kMaxDevices) {
    throw CudaError(
        fmt::format("[cuda] device index {} out of range (at most {})", device, kMaxDevices - 1),
        "device", static_cast<int>(cudaErrorInvalidDevice));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& slot = r.devices[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<DeviceState>(device);
  return *slot;
}

thread_local std::array<StreamId, kMaxDevices> t_current_stream{};

// Returns the workspaces of `s` to their allocators. Requires s.blas_mutex.
void release_workspaces(int device, DeviceState& s) {
  if (s.workspaces.empty()) return;
  {
    DeviceGuard guard(device);
    MEMGRAD_CUDA_CHECK(cudaDeviceSynchronize());  // no GEMM may still be using them
  }
  for (auto& [stream, w] : s.workspaces) w.allocator->free(w.block);
  s.workspaces.clear();
}

// PyTorch's parse of CUBLAS_WORKSPACE_CONFIG: ":SIZE:COUNT" pairs, SIZE in KiB.
size_t parse_workspace_config(const char* text) {
  size_t total = 0;
  std::string s(text);
  size_t pos = 0;
  while (pos < s.size() && s[pos] == ':') {
    char* end = nullptr;
    const unsigned long long size = std::strtoull(s.c_str() + pos + 1, &end, 10);
    if (end == nullptr || *end != ':') break;
    const unsigned long long count = std::strtoull(end + 1, &end, 10);
    total += static_cast<size_t>(size * 1024 * count);
    pos = static_cast<size_t>(end - s.c_str());
  }
  return total;
}

}  // namespace

void* HostStreamEvents::record(StreamId key) {
  const int device = static_cast<int>(key >> kDeviceShift);
  return stream_events(device).record(key & kStreamMask);
}

// ---- devices ----

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no GPU: not an error for the caller
      n = 0;
    }
    return n;
  }();
  return count;
}

const DeviceProperties& device_properties(int device) {
  DeviceState& s = state(device);
  std::call_once(s.properties_once, [&] {
    cudaDeviceProp p{};
    check_cuda(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties(&p, device)",
               fmt::format("cuda:{}", device));
    s.properties.name = p.name;
    s.properties.total_memory = p.totalGlobalMem;
    s.properties.multi_processor_count = p.multiProcessorCount;
    s.properties.major = p.major;
    s.properties.minor = p.minor;
    s.properties.l2_cache_bytes = static_cast<size_t>(p.l2CacheSize);
  });
  return s.properties;
}

// ---- streams ----

cudaStream_t stream_handle(int device, StreamId stream) {
  if (stream == kDefaultStream) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (stream > r.streams.size() || r.streams[stream - 1].first != device) {
    throw CudaError(fmt::format("[cuda] stream {} is not a stream of cuda:{}", stream, device),
                    "stream_handle", static_cast<int>(cudaErrorInvalidResourceHandle));
  }
  return r.streams[stream - 1].second;
}

cudaStream_t current_cuda_stream(int device) {
  return stream_handle(device, current_stream(device));
}

StreamId current_stream(int device) {
  if (device < 0 || device >= kMaxDevices) return kDefaultStream;
  return t_current_stream[static_cast<size_t>(device)];
}

void set_current_stream(int device, StreamId stream) {
  stream_handle(device, stream);  // validates
  t_current_stream[static_cast<size_t>(device)] = stream;
}

StreamId create_stream(int device) {
  DeviceGuard guard(device);
  cudaStream_t handle = nullptr;
  MEMGRAD_CUDA_CHECK(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.streams.emplace_back(device, handle);
  return static_cast<StreamId>(r.streams.size());
}

void synchronize_stream(int device, StreamId stream) {
  DeviceGuard guard(device);
  MEMGRAD_CUDA_CHECK(cudaStreamSynchronize(stream_handle(device, stream)));
}

void copy_bytes(int device, void* dst, const void* src, size_t nbytes, CopyKind kind, bool async) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  cudaStream_t stream = current_cuda_stream(device);
  const cudaMemcpyKind direction =
      kind == CopyKind::HostToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  check_cuda(cudaMemcpyAsync(dst, src, nbytes, direction, stream),
             "cudaMemcpyAsync(dst, src, nbytes, kind, stream)",
             fmt::format("cuda:{}, {} bytes", device, nbytes));
  if (!async) MEMGRAD_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_peer(int dst_device, void* dst, int src_device, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  synchronize_stream(src_device, current_stream(src_device));
  DeviceGuard guard(dst_device);
  cudaStream_t stream = current_cuda_stream(dst_device);
  check_cuda(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, stream),
             "cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, stream)",
             fmt::format("cuda:{} -> cuda:{}, {} bytes", src_device, dst_device, nbytes));
  MEMGRAD_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ---- record_stream events ----

StreamEvents& stream_events(int device) { return state(device).events; }

StreamEvents& host_stream_events() { return registry().host_events; }

StreamId host_stream_key(int device, StreamId stream) {
  return (static_cast<StreamId>(device) << kDeviceShift) | (stream & kStreamMask);
}

// ---- cuBLAS ----

BlasSession::BlasSession(int device) {
  DeviceState& s = state(device);
  lock_ = std::unique_lock<std::mutex>(s.blas_mutex);
  if (s.blas == nullptr) {
    MEMGRAD_CUBLAS_CHECK(cublas_api().create(&s.blas));
    // Plain float32 math unless TF32 is allowed per call (gemm.cpp picks the compute type).
    MEMGRAD_CUBLAS_CHECK(cublas_api().set_math_mode(s.blas, CUBLAS_DEFAULT_MATH));
  }
  handle_ = s.blas;
  const StreamId stream = current_stream(device);
  // cublasSetStream also resets the workspace to cuBLAS's own: set ours after it.
  MEMGRAD_CUBLAS_CHECK(cublas_api().set_stream(handle_, stream_handle(device, stream)));
  if (s.workspace_allocator == nullptr) return;
  auto it = s.workspaces.find(stream);
  if (it == s.workspaces.end()) {
    Workspace w{s.workspace_allocator->allocate(cublas_workspace_nbytes(device), stream),
                s.workspace_allocator};
    it = s.workspaces.emplace(stream, w).first;
  }
  MEMGRAD_CUBLAS_CHECK(
      cublas_api().set_workspace(handle_, it->second.block.ptr, it->second.block.requested));
}

void set_workspace_allocator(int device, PolicyAllocator* allocator) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.blas_mutex);
  if (s.workspace_allocator == allocator) return;
  release_workspaces(device, s);
  s.workspace_allocator = allocator;
}

void clear_cublas_workspaces(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.blas_mutex);
  release_workspaces(device, s);
}

size_t cublas_workspace_nbytes(int device) {
  if (const char* config = std::getenv("CUBLAS_WORKSPACE_CONFIG")) {
    const size_t n = parse_workspace_config(config);
    if (n > 0) return n;
  }
  constexpr size_t kKiB = 1024;
  if (device_properties(device).major >= 9) return 4096 * kKiB * 8;
  return 4096 * kKiB * 2 + 16 * kKiB * 8;
}

bool allow_tf32() { return registry().allow_tf32.load(std::memory_order_relaxed); }

void set_allow_tf32(bool allow) { registry().allow_tf32.store(allow, std::memory_order_relaxed); }

// ---- index checks ----

IndexCheckWord index_check_word(int device) {
  DeviceState& s = state(device);
  IndexCheckWord w{std::unique_lock<std::mutex>(s.index_mutex), nullptr};
  if (s.index_word == nullptr) {
    DeviceGuard guard(device);
    void* word = nullptr;
    MEMGRAD_CUDA_CHECK(cudaMalloc(&word, 2 * sizeof(unsigned long long)));
    s.index_word = static_cast<unsigned long long*>(word);
  }
  w.word = s.index_word;
  return w;
}

}  // namespace memgrad::kernels::cuda
