// The engine's typed errors and the helpers that build their messages.
//
// Every engine error message has the same form: the op in brackets, what is wrong, the
// offending values in PyTorch notation, and a hint where a fix is known, e.g.
//   [matmul] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)
// Shapes print as [2, 3], dtypes as float32, devices as cuda:0. The errors a user acts on
// (ShapeError, DTypeError, IndexError) also carry those values as fields, so a caller or a test
// reads the op and the shapes, dtypes or indices instead of parsing the text. An error holds
// its fields by value (a few dozen bytes per shape); it owns no tensor and keeps none alive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocator/error.h"
#include "engine/dtype.h"
#include "engine/shape.h"

namespace memgrad {

// Incompatible or invalid shapes (broadcasting, views, matmul, cat, ...).
// Fields: op() is the op the message names in brackets ("matmul"; empty when the message has
// no op); shapes() are the shapes involved, in the order the message names them (operands
// first, then a requested or result shape). shapes() is empty when no shape applies, e.g. a
// count of values or a single extent.
class ShapeError : public Error {
 public:
  ShapeError(std::string message, std::string op, std::vector<Shape> shapes)
      : Error(std::move(message)), op_(std::move(op)), shapes_(std::move(shapes)) {}
  const std::string& op() const { return op_; }
  const std::vector<Shape>& shapes() const { return shapes_; }

 private:
  std::string op_;
  std::vector<Shape> shapes_;
};

// A dtype an op does not accept, or inputs whose dtypes cannot be combined.
// Fields: op() as for ShapeError; dtypes() are the dtypes involved, in the order the message
// names them (for a result that cannot be cast: the result's dtype, then the output's). Empty
// when the message names no dtype (an unknown dtype name).
class DTypeError : public Error {
 public:
  DTypeError(std::string message, std::string op, std::vector<DType> dtypes)
      : Error(std::move(message)), op_(std::move(op)), dtypes_(std::move(dtypes)) {}
  const std::string& op() const { return op_; }
  const std::vector<DType>& dtypes() const { return dtypes_; }

 private:
  std::string op_;
  std::vector<DType> dtypes_;
};

// Inputs on different devices, an unknown device string, or a device this build lacks.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// The values behind an IndexError. A field the error does not involve stays empty: an index out
// of range sets index, size and dim; a dimension out of range sets dim (the dimension asked
// for, as given) and ndim.
struct IndexErrorInfo {
  std::optional<int64_t> index = std::nullopt;     // the offending index, as given (may be < 0)
  std::optional<int64_t> size = std::nullopt;      // the extent the index had to fall within
  std::optional<int64_t> dim = std::nullopt;       // the dimension indexed, or the bad dimension
  std::optional<int64_t> ndim = std::nullopt;      // the tensor's number of dimensions
  std::optional<int64_t> position = std::nullopt;  // where the bad index sits in an index tensor
};

// An index or dimension out of range.
// Fields: op() as for ShapeError, and the values of IndexErrorInfo (index(), size(), dim(),
// ndim(), position()), each empty where it does not apply.
class IndexError : public Error {
 public:
  IndexError(std::string message, std::string op, IndexErrorInfo info)
      : Error(std::move(message)), op_(std::move(op)), info_(info) {}
  // A dimension `dim` outside [-ndim, ndim) (a 0-d tensor accepts 0 and -1), with PyTorch's
  // message built from the fields: "[sum] dimension out of range (expected to be in range of
  // [-2, 1], but got 2)".
  static IndexError dim_out_of_range(std::string op, int64_t dim, int64_t ndim);

  const std::string& op() const { return op_; }
  const IndexErrorInfo& info() const { return info_; }
  std::optional<int64_t> index() const { return info_.index; }
  std::optional<int64_t> size() const { return info_.size; }
  std::optional<int64_t> dim() const { return info_.dim; }
  std::optional<int64_t> ndim() const { return info_.ndim; }
  std::optional<int64_t> position() const { return info_.position; }

 private:
  std::string op_;
  IndexErrorInfo info_;
};

// An invalid argument value that is not a shape, dtype, device or index (a negative
// probability, a zero step, ...).
class ValueError : public Error {
 public:
  using Error::Error;
};

// A checkpoint or tensor file that is truncated, malformed or does not match what it is
// loaded into.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

}  // namespace memgrad
