// Placeholder until this family is implemented: every entry point throws.
#include "kernels/cpu/cpu_backend.h"

#include "allocator/error.h"

namespace memgrad::kernels::cpu {

void CpuBackend::gemm(const GemmArgs&) { throw_internal_error("gemm: not implemented", std::source_location::current()); }

}  // namespace memgrad::kernels::cpu
