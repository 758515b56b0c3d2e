// B17: model checkpoints on disk. The measurement, for the program and its test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace memgrad::examples {

// One tensor of a state dict after a save and a load.
struct RoundTripRow {
  std::string name;
  std::string shape;       // "[128, 64]"
  int64_t nbytes = 0;      // numel x element size
  bool bit_exact = false;  // same name, shape, dtype and every byte equal
};

struct CheckpointFilesResult {
  // save_state_dict / load_state_dict of the model.
  std::vector<RoundTripRow> tensors;
  int64_t file_bytes = 0;     // the file's size on disk
  int64_t header_bytes = 0;   // the JSON header length stored in the file's first 8 bytes
  int64_t data_bytes = 0;     // expected: the sum of numel x element size
  int64_t load_expected = 0;  // bytes loading allocates: each tensor rounded to 512
  int64_t load_measured = 0;
  int64_t copy_in_measured = 0;  // Module::load_state_dict copies into existing parameters
  // The training checkpoint: `steps` steps, save, `steps` more (continued) versus a fresh model
  // and optimizer restored from the file and trained `steps` steps (resumed).
  int64_t steps = 0;
  int64_t checkpoint_file_bytes = 0;
  std::vector<double> losses_continued, losses_resumed;
  bool files_removed = false;  // the temporary directory is gone afterwards
};

// Trains a Linear(64, 128 size) -> ReLU -> Dropout(0.1) -> Linear(128 size, 10) classifier with
// Adam on `device` on synthetic batches, in a fresh temporary directory that is removed again.
CheckpointFilesResult measure_checkpoint_files(int64_t size, Device device, int64_t steps = 4);

}  // namespace memgrad::examples
