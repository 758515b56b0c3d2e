// AutogradError: misuse of the graph that PyTorch also rejects, with PyTorch's wording (users
// search for these texts): a saved tensor modified in place, backward through freed buffers,
// in-place on a leaf that requires grad, out= with grad, ... The one a user acts on most, a
// saved tensor changed in place, is its own type (VersionCounterError) whose fields say which
// node saved which tensor and which versions disagree. Errors hold plain values, never tensors,
// so a caught error keeps no memory alive.
#pragma once

#include <cstdint>
#include <string>

#include "allocator/error.h"
#include "engine/dtype.h"
#include "engine/shape.h"

namespace memgrad {

class AutogradError : public Error {
 public:
  using Error::Error;
};

// A tensor saved for backward was modified in place before the backward that reads it (its
// storage's version counter moved). The message is PyTorch's, built from the fields:
//   one of the variables needed for gradient computation has been modified by an inplace
//   operation: [float32 [3]], which is output 0 of ExpBackward, is at version 1; expected
//   version 0 instead. Hint: ...
// Fields: op() is the node that saved the tensor and now cannot run ("ExpBackward");
// saved_version() the version the tensor had when saved, current_version() the one it has now;
// shape() and dtype() describe the tensor; producer() names the node whose output the tensor is
// now (after an in-place op, that op's node; empty for a leaf) and producer_output() which output.
class VersionCounterError : public AutogradError {
 public:
  VersionCounterError(std::string op, uint32_t saved_version, uint32_t current_version, Shape shape,
                      DType dtype, std::string producer, uint32_t producer_output);
  const std::string& op() const { return op_; }
  uint32_t saved_version() const { return saved_version_; }
  uint32_t current_version() const { return current_version_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  const std::string& producer() const { return producer_; }
  uint32_t producer_output() const { return producer_output_; }

 private:
  std::string op_;
  uint32_t saved_version_;
  uint32_t current_version_;
  Shape shape_;
  DType dtype_;
  std::string producer_;
  uint32_t producer_output_;
};

}  // namespace memgrad
