// Placeholder until this family is implemented: every entry point throws.
#include "kernels/cpu/cpu_backend.h"

#include "allocator/error.h"

namespace memgrad::kernels::cpu {

IndexCheck CpuBackend::index_select(const Operand&, const Operand&, const Operand&, int) { throw_internal_error("index_select: not implemented", std::source_location::current()); }
IndexCheck CpuBackend::gather(const Operand&, const Operand&, const Operand&, int) { throw_internal_error("gather: not implemented", std::source_location::current()); }
IndexCheck CpuBackend::scatter_add(const Operand&, const Operand&, const Operand&, int) { throw_internal_error("scatter_add: not implemented", std::source_location::current()); }
IndexCheck CpuBackend::index_add(const Operand&, const Operand&, const Operand&, int) { throw_internal_error("index_add: not implemented", std::source_location::current()); }
void CpuBackend::masked_fill(const Operand&, const Operand&, double) { throw_internal_error("masked_fill: not implemented", std::source_location::current()); }
IndexCheck CpuBackend::one_hot(const Operand&, const Operand&) { throw_internal_error("one_hot: not implemented", std::source_location::current()); }

}  // namespace memgrad::kernels::cpu
