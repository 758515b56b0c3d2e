// Flags and set-up shared by the training programs (train_mlp, train_charlm).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
  bool amp = false;                 // --amp: the same as --precision amp-fp16
  std::string precision = "fp32";   // fp32, amp-fp16, amp-bf16, master-fp16, master-bf16
  bool ddp = false;                 // DistributedDataParallel (under ./memgrad launch)
  int zero = 0;                     // ZeRO stage 1, 2 or 3 (0: off; under ./memgrad launch)
  bool zero_overlap = false;        // ZeroOptions::overlap (stages 2 and 3)
  std::string backend;              // gloo or nccl; empty: by device (cuda and meta: nccl)
  bool describe = false;            // print a one-line description and exit
};

// Registers --epochs, --batch-size, --lr, --optimizer, --momentum, --weight-decay,
// --accumulate, --device, --memory-limit, --alloc-conf, --alloc-policy, --save, --resume, --seed,
// --checkpoint-segments, --amp, --precision, --ddp, --zero, --zero-overlap, --backend.
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

// --precision, read (--amp is amp-fp16):
//   fp32         float32 parameters, gradients and optimizer state (4 + 4 + 8 bytes with Adam)
//   amp-fp16     float32 parameters; autocast runs the matmuls in float16; a GradScaler
//   amp-bf16     the same in bfloat16, without a scaler (bfloat16 has float32's range)
//   master-fp16  float16 parameters and gradients, float32 master weights and optimizer state in
//                the optimizer (2 + 2 + 12 bytes with Adam); a GradScaler
//   master-bf16  the same in bfloat16, without a scaler
struct Precision {
  std::optional<DType> autocast;  // the dtype autocast runs in, when it is on
  DType parameters = kFloat32;    // what the model's parameters (and gradients) are stored in
  bool master_weights = false;    // float32 master copies in the optimizer
  bool loss_scaling = false;      // a GradScaler (float16's narrow range)
  std::string name;               // as --precision spells it
};
// Throws ValueError for --amp with another --precision.
Precision precision_of(const TrainOptions& options);

// The optimizer named by --optimizer ("adam", "adamw", "sgd"), with master weights when the
// precision asks for them.
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& options,
                                                 std::vector<Tensor> params);

// The bytes of state the optimizer allocates lazily in its first step for `params`: momentum
// (SGD) or two moments (Adam/AdamW) per element, in the parameters' dtype or, with master
// weights, in float32, each tensor rounded as the allocator rounds.
int64_t expected_optimizer_state(const TrainOptions& options, const std::vector<Tensor>& params);
// The float32 master copies the optimizer allocates at construction (0 without master weights).
int64_t expected_master_weights(const TrainOptions& options, const std::vector<Tensor>& params);

}  // namespace memgrad::examples
