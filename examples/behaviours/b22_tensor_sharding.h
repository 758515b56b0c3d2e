// B22: tensor sharding (DDP, ZeRO 1/2/3) measured per rank. The measurement, for the program
// and for the distributed tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/process_group.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"

namespace memgrad::examples {

// Zero2Overlap, Zero3Overlap: stages 2 and 3 with ZeroOptions::overlap (communication on the
// communication thread while backward computes: the next unit's gradients and parameters alive
// meanwhile).
enum class Sharding { Single, Ddp, DdpBucketView, Zero1, Zero2, Zero3, Zero2Overlap, Zero3Overlap };

// ZeRO-3, with or without overlap.
bool is_stage3(Sharding s);
// ZeRO 2-3 with overlap.
bool overlaps(Sharding s);
// "1 process", "DDP", "DDP, gradient_as_bucket_view", "ZeRO-1", ...
const char* sharding_title(Sharding s);
// "single", "ddp", "ddp_view", "zero1", "zero2", "zero3", "zero2_overlap", "zero3_overlap" (the
// worker's argument).
const char* sharding_key(Sharding s);
std::optional<Sharding> sharding_from_key(std::string_view key);

// The model and the training run every configuration repeats: an MLP
// inputs -> hidden -> hidden -> classes (ReLU), Adam, `steps` steps on one global batch.
// `dtype` is what the parameters and gradients are stored in; with `master_weights` (a 16-bit
// dtype) Adam keeps float32 master copies and its state in float32.
struct ShardingRun {
  int64_t inputs = 256;
  int64_t hidden = 512;
  int64_t classes = 10;
  int64_t batch = 48;  // global: each of N ranks takes batch / N rows (N must divide it)
  int64_t steps = 5;
  DType dtype = kFloat32;
  bool master_weights = false;
};

// A model as sharding sees it: its units (ZeRO's: every module with parameters of its own, the
// root first, then depth first), each the element counts of its parameters in registration
// order (DDP's order too).
struct ModelShape {
  std::vector<std::vector<int64_t>> units;
  int64_t parameters() const;    // Psi
  int64_t largest_unit() const;  // in elements
};
ModelShape model_shape(const nn::Module& model);

// What each parameter element costs, read from a run's model and optimizer (not assumed): its
// parameter and gradient bytes, and the optimizer's state for it (K in the ZeRO paper: 8 for
// Adam in float32, 12 for Adam with float32 master weights of 16-bit parameters).
struct StateBytes {
  int64_t parameter = 4;      // element_size of the parameters' dtype
  int64_t gradient = 4;       // the gradients': the parameters' dtype
  int64_t master = 0;         // the float32 master copy: 4 with master weights, else 0
  int64_t state_tensors = 2;  // the optimizer's state tensors per parameter (Adam 2)
  int64_t state_element = 4;  // bytes per element of each: float32 with master weights
  // K: master + state_tensors x state_element (Adam, float32: 8; with master weights: 12).
  int64_t optimizer() const { return master + state_tensors * state_element; }
  int64_t total() const { return parameter + gradient + optimizer(); }
};
// From `optimizer` and its parameters (the first one's dtype).
StateBytes state_bytes_of(const optim::Optimizer& optimizer);
// The run's model and optimizer, built as run_sharding_rank builds them, described.
ModelShape sharding_model_shape(const ShardingRun& run);
StateBytes sharding_state_bytes(const ShardingRun& run);

// Bytes, as allocated, one rank holds in each category; expected from the shapes or measured.
struct ShardingBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t buckets = 0;    // DDP's gradient buckets (kept)
  int64_t reduction = 0;  // ZeRO 2-3: one unit's full gradients + reduce-scatter staging (peak)
  int64_t gathered = 0;   // ZeRO-3: gathered parameters (peak)
  int64_t held() const { return parameters + gradients + optimizer_state + buckets; }
};

// What one rank measured.
struct RankMeasurement {
  int rank = 0;
  int world = 1;
  ShardingBytes bytes;
  int64_t held_measured = 0;    // memory_allocated() after the last step, less the data's bytes
  int64_t peak_above_held = 0;  // max_memory_allocated() during the last step, above that
  int64_t wire_bytes = -1;      // TCP payload sent during the last step (-1: one process)
  std::vector<double> losses;   // the global batch's mean loss at each step
};

// The parameters of the model (Psi) and of its largest layer.
int64_t sharding_parameter_count(const ShardingRun& run);
int64_t sharding_largest_layer(const ShardingRun& run);

// Expected bytes of one rank of any model: each tensor rounded to 512 bytes, each ZeRO unit
// padded to a multiple of `world` elements, DDP's buckets of 25 MiB.
ShardingBytes expected_sharding_bytes(Sharding s, int world, const ModelShape& shape,
                                      const StateBytes& bytes);
// The same for the run's model and optimizer.
ShardingBytes expected_sharding_bytes(Sharding s, int world, const ShardingRun& run);
// The ZeRO paper's bytes per parameter, P + G + K unsharded (16 for Adam in float32, also 16 =
// 2 + 2 + 12 with 16-bit parameters and float32 master weights): stage 1 P + G + K/N, stage 2
// P + (G + K)/N, stage 3 (P + G + K)/N; DDP P + G + K + G (its buckets); DDP with views P + G + K.
double formula_bytes_per_parameter(Sharding s, int world, const StateBytes& bytes);
// The least max_memory_allocated() must rise above what a rank held at the start of a step
// (peak_above_held), from the expected bytes: the gradients backward makes, all alive when it
// ends (none with bucket views: they are the buckets, kept), or, for ZeRO 2-3, the largest
// unit's full gradients and reduce-scatter staging while its gathered parameters (stage 3) are
// still alive, whichever is more (with overlap the same, and more comes on top when the next
// unit is alive too). Activations and temporaries come on top.
int64_t peak_above_held_floor(Sharding s, int world, const ShardingRun& run);
// Data bytes one rank sends per step, from the collectives' formulas (what the wire carries
// besides Gloo's message headers and the call checks).
int64_t expected_payload_per_step(Sharding s, int world, const ShardingRun& run);

// Trains `run` as this rank of `pg` (null: one process, Single) and measures. Throws ValueError
// when the ranks cannot split the batch evenly (naming both).
RankMeasurement run_sharding_rank(Sharding s, const ShardingRun& run,
                                  const std::shared_ptr<distributed::ProcessGroup>& pg);

// One line "b22 key=value ..." for the coordinator, and back.
std::string to_line(const RankMeasurement& m);
std::optional<RankMeasurement> from_line(std::string_view line);

}  // namespace memgrad::examples
