// The errors of reading and writing PyTorch's formats: a pickle the codec refuses (PickleError)
// and a trace or memory snapshot that is malformed (TraceError).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "base/error.h"

namespace memgrad {

// A pickle that read_pickle cannot read, or a value write_pickle cannot write. `offset` is the
// byte offset of the opcode at fault (for the writer, the output length when it failed);
// `opcode` its byte, or -1 when no single opcode is at fault (empty input, bytes after STOP).
class PickleError : public Error {
 public:
  PickleError(std::string message, size_t offset, int opcode)
      : Error(std::move(message)), offset(offset), opcode(opcode) {}
  size_t offset;
  int opcode;
};

// An allocator trace (or memory snapshot) that is not one or is malformed: the message names the
// event and the field, with its value. `place` is where in it ("device_traces[0][17]",
// "segments[3]", "memgrad_events[12]", "allocator_settings"), `field` the key at fault
// ("size"), `path` the file; each empty when the message names none.
class TraceError : public Error {
 public:
  explicit TraceError(std::string message, std::string place = {}, std::string field = {},
                      std::string path = {})
      : Error(std::move(message)),
        place(std::move(place)),
        field(std::move(field)),
        path(std::move(path)) {}
  std::string place;
  std::string field;
  std::string path;
};

}  // namespace memgrad
