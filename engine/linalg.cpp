// Placeholder until this family is implemented: every function throws.
#include "engine/linalg.h"

#include "allocator/error.h"

namespace memgrad {

Tensor mm(const Tensor&, const Tensor&) { throw_internal_error("mm: not implemented", std::source_location::current()); }
Tensor bmm(const Tensor&, const Tensor&) { throw_internal_error("bmm: not implemented", std::source_location::current()); }
Tensor matmul(const Tensor&, const Tensor&) { throw_internal_error("matmul: not implemented", std::source_location::current()); }
Tensor addmm(const Tensor&, const Tensor&, const Tensor&, Scalar, Scalar) { throw_internal_error("addmm: not implemented", std::source_location::current()); }
Tensor linear(const Tensor&, const Tensor&, const Tensor&) { throw_internal_error("linear: not implemented", std::source_location::current()); }
Tensor& mm_out(Tensor&, const Tensor&, const Tensor&) { throw_internal_error("mm_out: not implemented", std::source_location::current()); }
Tensor& matmul_out(Tensor&, const Tensor&, const Tensor&) { throw_internal_error("matmul_out: not implemented", std::source_location::current()); }

}  // namespace memgrad
