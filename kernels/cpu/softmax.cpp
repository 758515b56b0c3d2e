// Placeholder until this family is implemented: every entry point throws.
#include "kernels/cpu/cpu_backend.h"

#include "allocator/error.h"

namespace memgrad::kernels::cpu {

void CpuBackend::softmax(const Operand&, const Operand&, int, bool) { throw_internal_error("softmax: not implemented", std::source_location::current()); }
void CpuBackend::softmax_backward(const Operand&, const Operand&, const Operand&, int, bool) { throw_internal_error("softmax_backward: not implemented", std::source_location::current()); }

}  // namespace memgrad::kernels::cpu
