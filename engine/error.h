// The engine's typed errors and the helpers that build their messages.
//
// Every engine error message has the same form: the op in brackets, what is wrong, the
// offending values in PyTorch notation, and a hint where a fix is known, e.g.
//   [matmul] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)
// Shapes print as [2, 3], dtypes as float32, devices as cuda:0.
#pragma once

#include <string>

#include "allocator/error.h"

namespace memgrad {

// Incompatible or invalid shapes (broadcasting, views, matmul, cat, ...).
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A dtype an op does not accept, or inputs whose dtypes cannot be combined.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// Inputs on different devices, an unknown device string, or a device this build lacks.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// An index or dimension out of range.
class IndexError : public Error {
 public:
  using Error::Error;
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
