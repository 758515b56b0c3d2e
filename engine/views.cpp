// Placeholder until this family is implemented: every function throws.
#include "engine/views.h"

#include "allocator/error.h"

namespace memgrad {

Tensor view(const Tensor&, const Shape&) { throw_internal_error("view: not implemented", std::source_location::current()); }
Tensor reshape(const Tensor&, const Shape&) { throw_internal_error("reshape: not implemented", std::source_location::current()); }
Tensor flatten(const Tensor&, int64_t, int64_t) { throw_internal_error("flatten: not implemented", std::source_location::current()); }
Tensor unflatten(const Tensor&, int64_t, const Shape&) { throw_internal_error("unflatten: not implemented", std::source_location::current()); }
Tensor slice(const Tensor&, int64_t, int64_t, int64_t, int64_t) { throw_internal_error("slice: not implemented", std::source_location::current()); }
Tensor narrow(const Tensor&, int64_t, int64_t, int64_t) { throw_internal_error("narrow: not implemented", std::source_location::current()); }
Tensor select(const Tensor&, int64_t, int64_t) { throw_internal_error("select: not implemented", std::source_location::current()); }
Tensor transpose(const Tensor&, int64_t, int64_t) { throw_internal_error("transpose: not implemented", std::source_location::current()); }
Tensor t(const Tensor&) { throw_internal_error("t: not implemented", std::source_location::current()); }
Tensor mT(const Tensor&) { throw_internal_error("mT: not implemented", std::source_location::current()); }
Tensor permute(const Tensor&, const Shape&) { throw_internal_error("permute: not implemented", std::source_location::current()); }
Tensor expand(const Tensor&, const Shape&) { throw_internal_error("expand: not implemented", std::source_location::current()); }
Tensor squeeze(const Tensor&) { throw_internal_error("squeeze: not implemented", std::source_location::current()); }
Tensor squeeze(const Tensor&, int64_t) { throw_internal_error("squeeze: not implemented", std::source_location::current()); }
Tensor unsqueeze(const Tensor&, int64_t) { throw_internal_error("unsqueeze: not implemented", std::source_location::current()); }
Tensor as_strided(const Tensor&, const Shape&, const Shape&, std::optional<int64_t>) { throw_internal_error("as_strided: not implemented", std::source_location::current()); }
Tensor diagonal(const Tensor&, int64_t, int64_t, int64_t) { throw_internal_error("diagonal: not implemented", std::source_location::current()); }
std::vector<Tensor> chunk(const Tensor&, int64_t, int64_t) { throw_internal_error("chunk: not implemented", std::source_location::current()); }
std::vector<Tensor> split(const Tensor&, int64_t, int64_t) { throw_internal_error("split: not implemented", std::source_location::current()); }
std::vector<Tensor> split(const Tensor&, const std::vector<int64_t>&, int64_t) { throw_internal_error("split: not implemented", std::source_location::current()); }
std::vector<Tensor> unbind(const Tensor&, int64_t) { throw_internal_error("unbind: not implemented", std::source_location::current()); }
Tensor make_view(const Tensor&, const Shape&, const Shape&, int64_t) { throw_internal_error("make_view: not implemented", std::source_location::current()); }

}  // namespace memgrad
