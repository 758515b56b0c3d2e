// Placeholder until this family is implemented: every function throws.
#include "engine/indexing.h"

#include "allocator/error.h"

namespace memgrad {

Tensor index_select(const Tensor&, int64_t, const Tensor&) { throw_internal_error("index_select: not implemented", std::source_location::current()); }
Tensor gather(const Tensor&, int64_t, const Tensor&) { throw_internal_error("gather: not implemented", std::source_location::current()); }
Tensor scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { throw_internal_error("scatter_add: not implemented", std::source_location::current()); }
Tensor& scatter_add_(Tensor&, int64_t, const Tensor&, const Tensor&) { throw_internal_error("scatter_add_: not implemented", std::source_location::current()); }
Tensor embedding(const Tensor&, const Tensor&) { throw_internal_error("embedding: not implemented", std::source_location::current()); }
Tensor masked_fill(const Tensor&, const Tensor&, Scalar) { throw_internal_error("masked_fill: not implemented", std::source_location::current()); }
Tensor& masked_fill_(Tensor&, const Tensor&, Scalar) { throw_internal_error("masked_fill_: not implemented", std::source_location::current()); }
Tensor one_hot(const Tensor&, int64_t) { throw_internal_error("one_hot: not implemented", std::source_location::current()); }
Tensor cat(const std::vector<Tensor>&, int64_t) { throw_internal_error("cat: not implemented", std::source_location::current()); }
Tensor stack(const std::vector<Tensor>&, int64_t) { throw_internal_error("stack: not implemented", std::source_location::current()); }
Tensor pad(const Tensor&, const std::vector<int64_t>&, Scalar) { throw_internal_error("pad: not implemented", std::source_location::current()); }

}  // namespace memgrad
