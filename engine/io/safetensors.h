// Saving and loading tensors in the safetensors format
// (https://github.com/huggingface/safetensors): 8 bytes of little-endian header length, a JSON
// header mapping each name to its dtype ("F32", "F64", "F16", "I64", "BOOL"), shape and byte
// offsets, then the raw little-endian data. Files round-trip bit-exactly and open in Python's
// safetensors.
//
// Loading validates everything before trusting it: a truncated file, a header longer than the
// file, malformed JSON, an unknown dtype, a shape with more than 8 dimensions or more elements
// than the data holds, offsets outside the data or inconsistent with the shape, and overlapping
// tensors each throw a CheckpointError naming the file and the problem.
#pragma once

#include <map>
#include <string>

#include "engine/nn/module.h"

namespace memgrad::io {

// Tensors in the file's order plus the free-form string metadata ("__metadata__").
struct SafetensorsFile {
  nn::StateDict tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `file` to `path` atomically: a temporary file in the same directory, fsync, rename,
// fsync of the directory. A crash mid-save leaves the previous file intact.
void save_safetensors(const std::string& path, const SafetensorsFile& file);
// Reads and validates `path`. Tensors are created on `device`.
SafetensorsFile load_safetensors(const std::string& path, Device device = kCPU);

// The same with bytes in memory (for tests of corrupt data).
std::string encode_safetensors(const SafetensorsFile& file);
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& what = "<memory>",
                                   Device device = kCPU);

}  // namespace memgrad::io
