// Placeholder until this family is implemented: every entry point throws.
#include "kernels/cpu/cpu_backend.h"

#include "allocator/error.h"

namespace memgrad::kernels::cpu {

void CpuBackend::reduce(ReduceOp, const Operand&, const Operand&) { throw_internal_error("reduce: not implemented", std::source_location::current()); }
void CpuBackend::var(const Operand&, const Operand&, int64_t, bool) { throw_internal_error("var: not implemented", std::source_location::current()); }
void CpuBackend::arg_reduce(bool, const Operand&, const Operand&, const Operand&, int) { throw_internal_error("arg_reduce: not implemented", std::source_location::current()); }
void CpuBackend::logsumexp(const Operand&, const Operand&) { throw_internal_error("logsumexp: not implemented", std::source_location::current()); }
void CpuBackend::norm(const Operand&, const Operand&, double) { throw_internal_error("norm: not implemented", std::source_location::current()); }

}  // namespace memgrad::kernels::cpu
