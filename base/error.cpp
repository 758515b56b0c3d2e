// The message of an InternalError: where the invariant broke and what it was.
#include "base/error.h"

#include <fmt/format.h>

namespace memgrad {

void throw_internal_error(const char* what, std::source_location where) {
  throw InternalError(fmt::format("internal error at {}:{} ({}): {}", where.file_name(),
                                  where.line(), where.function_name(), what));
}

}  // namespace memgrad
