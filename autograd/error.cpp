// VersionCounterError's message, built from its fields in PyTorch's wording.
#include "autograd/error.h"

#include <utility>

#include <fmt/format.h>

namespace memgrad {
namespace {

std::string version_message(const std::string& op, uint32_t saved_version, uint32_t current_version,
                            const Shape& shape, DType dtype, const std::string& producer,
                            uint32_t producer_output) {
  const std::string output_of =
      producer.empty() ? "" : fmt::format(", which is output {} of {},", producer_output, producer);
  return fmt::format(
      "one of the variables needed for gradient computation has been modified by an inplace "
      "operation: [{} {}]{} is at version {}; expected version {} instead. Hint: the tensor was "
      "changed in place after {} saved it for backward; clone it before the in-place op, or "
      "use the out-of-place op.",
      dtype_name(dtype), to_string(shape), output_of, current_version, saved_version, op);
}

}  // namespace

VersionCounterError::VersionCounterError(std::string op, uint32_t saved_version,
                                         uint32_t current_version, Shape shape, DType dtype,
                                         std::string producer, uint32_t producer_output)
    : AutogradError(version_message(op, saved_version, current_version, shape, dtype, producer,
                                    producer_output)),
      op_(std::move(op)),
      saved_version_(saved_version),
      current_version_(current_version),
      shape_(shape),
      dtype_(dtype),
      producer_(std::move(producer)),
      producer_output_(producer_output) {}

}  // namespace memgrad
