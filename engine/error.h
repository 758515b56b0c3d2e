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

// The shapes a ShapeError names, each in its role; a role the error does not involve is empty.
//   lhs, rhs          the two shapes an op combines or compares, as the message names them
//                     (matmul's operands, broadcast's, cat's and stack's tensors, a loss's input
//                     and target, as_strided's sizes and strides)
//   expected, actual  what a shape had to be (or was asked to become: a view's or an expand's
//                     target, out's shape, a permutation's dims) and what it is; a shape that is
//                     wrong in itself (a negative size, a 3-D tensor where a matrix is needed)
//                     is `actual` alone, a target invalid in itself is `expected` alone
struct ShapeRoles {
  std::optional<Shape> lhs;
  std::optional<Shape> rhs;
  std::optional<Shape> expected;
  std::optional<Shape> actual;

  static ShapeRoles operands(Shape lhs, Shape rhs) {
    ShapeRoles r;
    r.lhs = std::move(lhs);
    r.rhs = std::move(rhs);
    return r;
  }
  static ShapeRoles wanted(Shape expected, std::optional<Shape> actual = std::nullopt) {
    ShapeRoles r;
    r.expected = std::move(expected);
    r.actual = std::move(actual);
    return r;
  }
  static ShapeRoles given(Shape actual) {
    ShapeRoles r;
    r.actual = std::move(actual);
    return r;
  }
};

// Incompatible or invalid shapes (broadcasting, views, matmul, cat, ...).
// Fields: op() is the op the message names in brackets ("matmul"; empty when the message has
// no op); lhs(), rhs(), expected() and actual() are the shapes involved in their roles
// (ShapeRoles), each empty where it does not apply.
class ShapeError : public Error {
 public:
  ShapeError(std::string message, std::string op, ShapeRoles shapes)
      : Error(std::move(message)), op_(std::move(op)), shapes_(std::move(shapes)) {}
  const std::string& op() const { return op_; }
  const std::optional<Shape>& lhs() const { return shapes_.lhs; }
  const std::optional<Shape>& rhs() const { return shapes_.rhs; }
  const std::optional<Shape>& expected() const { return shapes_.expected; }
  const std::optional<Shape>& actual() const { return shapes_.actual; }

 private:
  std::string op_;
  ShapeRoles shapes_;
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
// Fields: op() as for ShapeError ("device" when a device cannot be named or made); devices()
// are the devices involved, as the message names them ("cuda:0", "sim:1", or the text that
// named no device), in its order; empty when it names none (no CUDA device present).
class DeviceError : public Error {
 public:
  DeviceError(std::string message, std::string op, std::vector<std::string> devices = {})
      : Error(std::move(message)), op_(std::move(op)), devices_(std::move(devices)) {}
  const std::string& op() const { return op_; }
  const std::vector<std::string>& devices() const { return devices_; }

 private:
  std::string op_;
  std::vector<std::string> devices_;
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
// Fields: op() as for ShapeError; argument() is the argument at fault as the message names it
// ("p", "label_smoothing", "params[2]", "--batch-size"; empty when it names none) and value()
// its value as text (empty when there is none to show).
class ValueError : public Error {
 public:
  ValueError(std::string message, std::string op, std::string argument = {}, std::string value = {})
      : Error(std::move(message)),
        op_(std::move(op)),
        argument_(std::move(argument)),
        value_(std::move(value)) {}
  const std::string& op() const { return op_; }
  const std::string& argument() const { return argument_; }
  const std::string& value() const { return value_; }

 private:
  std::string op_;
  std::string argument_;
  std::string value_;
};

// A checkpoint, data or tensor file (or a state dict) that is truncated, malformed or does not
// match what it is loaded into.
// Fields: op() as for ShapeError ("safetensors", "checkpoint", "read_idx", "read_csv",
// "load_state_dict", "optim"); path() is the file (empty for bytes in memory or a state dict);
// entry() the tensor, key or line at fault (empty when the file as a whole is).
class CheckpointError : public Error {
 public:
  CheckpointError(std::string message, std::string op, std::string path = {},
                  std::string entry = {})
      : Error(std::move(message)),
        op_(std::move(op)),
        path_(std::move(path)),
        entry_(std::move(entry)) {}
  const std::string& op() const { return op_; }
  const std::string& path() const { return path_; }
  const std::string& entry() const { return entry_; }

 private:
  std::string op_;
  std::string path_;
  std::string entry_;
};

}  // namespace memgrad
