// Shared training flags.
#include "examples/common/train_options.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "allocator/config.h"
#include "allocator/error.h"
#include "engine/error.h"
#include "engine/memory.h"
#include "examples/common/report.h"
#include "lab/policy_registry.h"

namespace memgrad::examples {

void add_train_flags(CLI::App& app, TrainOptions& o, int64_t default_epochs,
                     int64_t default_batch) {
  o.epochs = default_epochs;
  o.batch_size = default_batch;
  app.add_option("--epochs", o.epochs, "Passes over the training set")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "Examples per optimizer step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "Learning rate (default: 1e-3 for adam/adamw, 0.1 for sgd)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--optimizer", o.optimizer, "adam, adamw or sgd")
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}));
  app.add_option("--momentum", o.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--weight-decay", o.weight_decay, "Weight decay")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--accumulate", o.accumulate,
                 "Micro-batches per step (gradient accumulation; must divide --batch-size)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--device", o.device,
                 "cpu, sim:N (a simulated bounded device), cuda[:N] or meta:N (shapes only: the "
                 "memory of a run without computing it)")
      ->capture_default_str();
  app.add_option("--memory-limit", o.memory_limit,
                 "Capacity of the device, e.g. 256MiB (cpu, sim and meta)");
  app.add_option("--alloc-conf", o.alloc_conf,
                 "Allocator options, MEMGRAD_ALLOC_CONF syntax (e.g. policy:passthrough)");
  app.add_option(
      "--alloc-policy", o.alloc_policy,
      fmt::format("Allocator policy: {} (policy:NAME in --alloc-conf)", known_policies()));
  app.add_option("--save", o.save, "Write a training checkpoint here after every epoch");
  app.add_option("--resume", o.resume, "Resume from a training checkpoint");
  app.add_option("--seed", o.seed, "Random seed (weights, shuffling, dropout)")
      ->capture_default_str();
  app.add_option("--checkpoint-segments", o.checkpoint_segments,
                 "Activation checkpointing: number of segments (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--amp", o.amp,
               "Mixed precision: float16 autocast with a GradScaler (--precision amp-fp16)");
  app.add_option("--precision", o.precision,
                 "fp32; amp-fp16 or amp-bf16 (float32 parameters, autocast); master-fp16 or "
                 "master-bf16 (16-bit parameters and gradients, float32 master weights and "
                 "optimizer state: 2 + 2 + 12 bytes per parameter with Adam)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "amp-fp16", "amp-bf16", "master-fp16", "master-bf16"}));
  app.add_flag("--ddp", o.ddp, "DistributedDataParallel on the ranks of ./memgrad launch");
  app.add_option("--zero", o.zero, "ZeRO stage 1, 2 or 3 on the ranks of ./memgrad launch")
      ->check(CLI::Range(1, 3));
  app.add_flag("--zero-overlap", o.zero_overlap,
               "With --zero 2 or 3: reduce-scatter (and at stage 3 gather the next layer) on the "
               "communication thread while backward computes; holds two layers' buffers at once");
  app.add_option("--backend", o.backend,
                 "Collectives of --ddp/--zero: gloo (cpu, sim:N) or nccl (cuda); on meta:N the "
                 "engine whose allocations a rank reproduces (default: nccl)")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  app.add_flag("--describe", o.describe, "Print a one-line description and exit");
}

namespace {

// The folder a checkpoint is written to must exist and be writable now.
void check_writable_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    throw IoError(fmt::format("--save {}: the folder '{}' does not exist", path, dir), path);
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw IoError(fmt::format("--save {}: the folder '{}' is not writable", path, dir), path);
  }
}

}  // namespace

Device configure_device(const TrainOptions& o) {
  // With --ddp or --zero, a plain "cuda" is this rank's GPU: cuda:LOCAL_RANK, where the NCCL
  // group of the rank lives (distributed/process_group.h).
  const char* local_rank = std::getenv("LOCAL_RANK");
  const bool per_rank_gpu = (o.ddp || o.zero != 0) && o.device == "cuda" && local_rank != nullptr;
  const Device device(per_rank_gpu ? fmt::format("cuda:{}", local_rank) : o.device);
  if (o.batch_size % o.accumulate != 0) {
    throw ValueError(
        fmt::format("--accumulate {} must divide --batch-size {}", o.accumulate, o.batch_size), "",
        "--accumulate", fmt::format("{}", o.accumulate));
  }
  if (!o.memory_limit.empty()) {
    const size_t limit = parse_memory_size(o.memory_limit, "--memory-limit");
    if (device.is_cpu()) {
      set_cpu_memory_limit(limit);
    } else if (device.is_sim()) {
      set_sim_capacity(device.index(), limit);
    } else if (device.is_meta()) {
      set_meta_capacity(device.index(), limit);
    } else {
      throw ValueError(
          "--memory-limit applies to cpu, sim and meta devices; for cuda use "
          "--alloc-conf per_process_memory_fraction:F",
          "", "--memory-limit");
    }
  }
  std::string conf = o.alloc_conf;
  if (!o.alloc_policy.empty()) {
    conf = fmt::format("policy:{}{}{}", o.alloc_policy, conf.empty() ? "" : ",", conf);
  }
  if (!conf.empty()) set_allocator_config(device, AllocatorConfig::parse(conf));
  allocator_for(device);  // fail now, not mid-training, for a device that is not there
  if (!o.save.empty()) check_writable_folder(o.save);
  return device;
}

void check_batch_size(const TrainOptions& o, size_t examples) {
  if (static_cast<uint64_t>(o.batch_size) > examples) {
    throw ValueError(fmt::format("--batch-size {} is more than the {} training examples (no full "
                                 "batch, so no step would run)",
                                 o.batch_size, examples),
                     "", "--batch-size", fmt::format("{}", o.batch_size));
  }
}

Precision precision_of(const TrainOptions& o) {
  if (o.amp && o.precision != "fp32" && o.precision != "amp-fp16") {
    throw ValueError(fmt::format("--amp is --precision amp-fp16; it cannot be combined with "
                                 "--precision {}",
                                 o.precision),
                     "", "--precision", o.precision);
  }
  const std::string name = o.amp ? "amp-fp16" : o.precision;
  Precision p;
  p.name = name;
  const DType low = name.ends_with("bf16") ? kBFloat16 : kFloat16;
  if (name.starts_with("amp-")) p.autocast = low;
  if (name.starts_with("master-")) {
    p.parameters = low;
    p.master_weights = true;
  }
  p.loss_scaling = name.ends_with("fp16");
  return p;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o,
                                                 std::vector<Tensor> params) {
  const bool master = precision_of(o).master_weights;
  if (o.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{.lr = o.lr > 0 ? o.lr : 0.1,
                                                          .momentum = o.momentum,
                                                          .weight_decay = o.weight_decay,
                                                          .master_weights = master});
  }
  optim::AdamOptions a;
  a.lr = o.lr > 0 ? o.lr : 1e-3;
  a.weight_decay = o.optimizer == "adamw" && o.weight_decay == 0.0 ? 0.01 : o.weight_decay;
  a.master_weights = master;
  if (o.optimizer == "adamw") return std::make_unique<optim::AdamW>(std::move(params), a);
  return std::make_unique<optim::Adam>(std::move(params), a);
}

namespace {

// Per tensor, `copies` buffers of its elements at `bytes` each (0: the tensor's own), rounded.
int64_t per_tensor(const std::vector<Tensor>& params, int64_t copies, int64_t bytes) {
  int64_t total = 0;
  for (const Tensor& p : params) {
    const int64_t each = bytes > 0 ? bytes : static_cast<int64_t>(element_size(p.dtype()));
    total += copies * rounded(p.numel() * each);
  }
  return total;
}

}  // namespace

int64_t expected_optimizer_state(const TrainOptions& o, const std::vector<Tensor>& params) {
  const int64_t copies = o.optimizer == "sgd" ? (o.momentum > 0 ? 1 : 0) : 2;
  return per_tensor(params, copies, precision_of(o).master_weights ? 4 : 0);
}

int64_t expected_master_weights(const TrainOptions& o, const std::vector<Tensor>& params) {
  return precision_of(o).master_weights ? per_tensor(params, 1, 4) : 0;
}

}  // namespace memgrad::examples
