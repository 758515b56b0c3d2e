// Loading cuBLAS at its first use (see cublas_api.h).
#include "kernels/cuda/cublas_api.h"

#include <dlfcn.h>

#include <atomic>
#include <string>

#include <fmt/format.h>

// A cuBLAS function's exported name: cublas_v2.h maps most names to a "_v2" symbol with a macro,
// so the name is expanded before it is turned into a string.
#define MEMGRAD_SYMBOL_NAME(name) MEMGRAD_SYMBOL_STRING(name)
#define MEMGRAD_SYMBOL_STRING(name) #name

namespace memgrad::kernels::cuda {
namespace {

std::atomic<bool> g_loaded{false};

// The library by its soname (found through the executable's run path, which the build sets to
// the toolkit's library folder, or the system's), then by the toolkit's path as configured.
void* open_library() {
  const std::string soname = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef MEMGRAD_CUDA_LIBDIR
  if (handle == nullptr) {
    handle =
        dlopen((std::string(MEMGRAD_CUDA_LIBDIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (handle == nullptr) {
    const char* why = dlerror();
    throw CudaError(fmt::format("[cuda] cannot load {}: {} (is the CUDA toolkit's library folder "
                                "on LD_LIBRARY_PATH?)",
                                soname, why != nullptr ? why : "unknown error"),
                    "dlopen", 0);
  }
  return handle;
}

template <typename Fn>
void find(void* library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) {
    throw CudaError(fmt::format("[cuda] libcublas has no function {}", name), "dlsym", 0);
  }
}

CublasApi load() {
  void* library = open_library();  // never closed: the process keeps using it
  CublasApi api;
  find(library, MEMGRAD_SYMBOL_NAME(cublasCreate), api.create);
  find(library, MEMGRAD_SYMBOL_NAME(cublasSetMathMode), api.set_math_mode);
  find(library, MEMGRAD_SYMBOL_NAME(cublasSetStream), api.set_stream);
  find(library, MEMGRAD_SYMBOL_NAME(cublasSetWorkspace), api.set_workspace);
  find(library, MEMGRAD_SYMBOL_NAME(cublasGemmEx_64), api.gemm_ex);
  find(library, MEMGRAD_SYMBOL_NAME(cublasGemmStridedBatchedEx_64), api.gemm_strided_batched_ex);
  find(library, MEMGRAD_SYMBOL_NAME(cublasGetStatusName), api.status_name);
  find(library, MEMGRAD_SYMBOL_NAME(cublasGetStatusString), api.status_string);
  g_loaded = true;
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

bool cublas_loaded() { return g_loaded.load(); }

void check_cublas(int status, std::string_view call, std::string_view context,
                  std::source_location where) {
  if (status == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  const auto s = static_cast<cublasStatus_t>(status);
  const CublasApi& api = cublas_api();  // a status implies cuBLAS is loaded
  std::string message = fmt::format("[cuda] {} failed: {} ({}) at {}:{}", call, api.status_name(s),
                                    api.status_string(s), where.file_name(), where.line());
  if (!context.empty()) message += fmt::format("; {}", context);
  throw CudaError(std::move(message), std::string(call), status);
}

}  // namespace memgrad::kernels::cuda
