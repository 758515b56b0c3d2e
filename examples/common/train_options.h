// Flags and set-up shared by the training programs (train_mlp, train_charlm).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/optim/optimizer.h"

// CLI11's App: the programs that add these flags include <CLI/CLI.hpp>, the rest need not.
namespace CLI {
class App;
}  // namespace CLI

namespace memgrad::examples {

struct TrainOptions {
  int64_t epochs = 10;
  int64_t batch_size = 128;
  double lr = 0.0;  // 0: the optimizer's default (Adam 1e-3, SGD 0.1)
  std::string optimizer = "adam";
  double momentum = 0.9;
  double weight_decay = 0.0;
  int64_t accumulate = 1;  // micro-batches per optimizer step
  std::string device = "cpu";
  std::string memory_limit;  // e.g. "256MiB": the device becomes bounded
  std::string alloc_conf;    // MEMGRAD_ALLOC_CONF syntax
  std::string alloc_policy;  // the allocator policy (known_policies()); empty: alloc_conf's
  std::string save, resume;  // training checkpoint paths
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  uint64_t seed = 0;
  int64_t checkpoint_segments = 0;  // activation checkpointing (0: off)
  bool amp = false;                 // float16 autocast + GradScaler
  bool ddp = false;                 // DistributedDataParallel (under ./memgrad launch)
  int zero = 0;                     // ZeRO stage 1, 2 or 3 (0: off; under ./memgrad launch)
  std::string backend;              // gloo or nccl; empty: by device (cuda and meta: nccl)
  bool describe = false;            // print a one-line description and exit
};

// Registers --epochs, --batch-size, --lr, --optimizer, --momentum, --weight-decay,
// --accumulate, --device, --memory-limit, --alloc-conf, --alloc-policy, --save, --resume, --seed,
// --checkpoint-segments, --amp, --ddp, --zero, --backend.
void add_train_flags(CLI::App& app, TrainOptions& options, int64_t default_epochs,
                     int64_t default_batch);

// Applies --alloc-conf, --alloc-policy (policy:NAME added to --alloc-conf; both naming a policy
// is a ConfigError) and --memory-limit to the chosen device and returns it (with --ddp or
// --zero, --device cuda means cuda:LOCAL_RANK, each rank its own GPU), and checks that
// --save names a writable folder (before any training, not after the first epoch). Throws
// ConfigError / DeviceError / ValueError / IoError with the flag's name for bad values.
Device configure_device(const TrainOptions& options);

// Throws ValueError when --batch-size asks for more examples than the training set holds (with
// drop_last, no step would run).
void check_batch_size(const TrainOptions& options, size_t examples);

// The optimizer named by --optimizer ("adam", "adamw", "sgd").
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& options,
                                                 std::vector<Tensor> params);

// Optimizer state per parameter byte: 2 for Adam/AdamW, 1 for SGD with momentum, else 0.
int64_t optimizer_state_multiple(const TrainOptions& options);

}  // namespace memgrad::examples
