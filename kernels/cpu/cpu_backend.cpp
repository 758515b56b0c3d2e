// The CPU backend instance.
#include "kernels/cpu/cpu_backend.h"

namespace memgrad::kernels {

KernelBackend& cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

}  // namespace memgrad::kernels
