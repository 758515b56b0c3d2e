// AutogradError: misuse of the graph that PyTorch also rejects, with PyTorch's wording (users
// search for these texts): a saved tensor modified in place, backward through freed buffers,
// in-place on a leaf that requires grad, out= with grad, ...
#pragma once

#include "allocator/error.h"

namespace memgrad {

class AutogradError : public Error {
 public:
  using Error::Error;
};

}  // namespace memgrad
