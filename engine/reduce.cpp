// Placeholder until this family is implemented: every function throws.
#include "engine/reduce.h"

#include "allocator/error.h"

namespace memgrad {

Tensor sum(const Tensor&, const Shape&, bool, std::optional<DType>) { throw_internal_error("sum: not implemented", std::source_location::current()); }
Tensor mean(const Tensor&, const Shape&, bool) { throw_internal_error("mean: not implemented", std::source_location::current()); }
Tensor var(const Tensor&, const Shape&, int64_t, bool) { throw_internal_error("var: not implemented", std::source_location::current()); }
Tensor std(const Tensor&, const Shape&, int64_t, bool) { throw_internal_error("std: not implemented", std::source_location::current()); }
Tensor max(const Tensor&) { throw_internal_error("max: not implemented", std::source_location::current()); }
Tensor min(const Tensor&) { throw_internal_error("min: not implemented", std::source_location::current()); }
std::pair<Tensor, Tensor> max(const Tensor&, int64_t, bool) { throw_internal_error("max: not implemented", std::source_location::current()); }
std::pair<Tensor, Tensor> min(const Tensor&, int64_t, bool) { throw_internal_error("min: not implemented", std::source_location::current()); }
Tensor amax(const Tensor&, const Shape&, bool) { throw_internal_error("amax: not implemented", std::source_location::current()); }
Tensor amin(const Tensor&, const Shape&, bool) { throw_internal_error("amin: not implemented", std::source_location::current()); }
Tensor argmax(const Tensor&, std::optional<int64_t>, bool) { throw_internal_error("argmax: not implemented", std::source_location::current()); }
Tensor argmin(const Tensor&, std::optional<int64_t>, bool) { throw_internal_error("argmin: not implemented", std::source_location::current()); }
Tensor logsumexp(const Tensor&, const Shape&, bool) { throw_internal_error("logsumexp: not implemented", std::source_location::current()); }
Tensor norm(const Tensor&, double, const Shape&, bool) { throw_internal_error("norm: not implemented", std::source_location::current()); }
Tensor any(const Tensor&) { throw_internal_error("any: not implemented", std::source_location::current()); }
Tensor all(const Tensor&) { throw_internal_error("all: not implemented", std::source_location::current()); }
Tensor softmax(const Tensor&, int64_t) { throw_internal_error("softmax: not implemented", std::source_location::current()); }
Tensor log_softmax(const Tensor&, int64_t) { throw_internal_error("log_softmax: not implemented", std::source_location::current()); }
Tensor& softmax_out(Tensor&, const Tensor&, int64_t) { throw_internal_error("softmax_out: not implemented", std::source_location::current()); }

}  // namespace memgrad
