// B22: tensor sharding (DDP, ZeRO 1/2/3) measured per rank. The measurement, for the program
// and for the distributed tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/process_group.h"

namespace memgrad::examples {

enum class Sharding { Single, Ddp, DdpBucketView, Zero1, Zero2, Zero3 };

// "1 process", "DDP", "DDP, gradient_as_bucket_view", "ZeRO-1", ...
const char* sharding_title(Sharding s);
// "single", "ddp", "ddp_view", "zero1", "zero2", "zero3" (the worker's argument).
const char* sharding_key(Sharding s);
std::optional<Sharding> sharding_from_key(std::string_view key);

// The model and the training run every configuration repeats: an MLP
// inputs -> hidden -> hidden -> classes (ReLU), Adam, `steps` steps on one global batch.
struct ShardingRun {
  int64_t inputs = 256;
  int64_t hidden = 512;
  int64_t classes = 10;
  int64_t batch = 64;  // global: each of N ranks takes batch / N rows
  int64_t steps = 5;
};

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

// Expected bytes of one rank, from the shapes: each tensor rounded to 512 bytes, each ZeRO unit
// (one Linear) padded to a multiple of `world` elements, DDP's buckets of 25 MiB.
ShardingBytes expected_sharding_bytes(Sharding s, int world, const ShardingRun& run);
// The ZeRO paper's bytes per parameter for Adam in float32 (16 unsharded): stage 1 8 + 8/N,
// stage 2 4 + 12/N, stage 3 16/N; DDP 16 + 4 (its buckets); DDP with views 16.
double formula_bytes_per_parameter(Sharding s, int world);
// The least max_memory_allocated() must rise above what a rank held at the start of a step
// (peak_above_held), from the expected bytes: the gradients backward makes, all alive when it
// ends (none with bucket views: they are the buckets, kept), or, for ZeRO 2-3, the largest
// unit's full gradients and reduce-scatter staging while its gathered parameters (stage 3) are
// still alive, whichever is more. Activations and temporaries come on top.
int64_t peak_above_held_floor(const ShardingBytes& expected);
// Data bytes one rank sends per step, from the collectives' formulas (what the wire carries
// besides Gloo's message headers and the call checks).
int64_t expected_payload_per_step(Sharding s, int world, const ShardingRun& run);

// Trains `run` as this rank of `pg` (null: one process, Single) and measures.
RankMeasurement run_sharding_rank(Sharding s, const ShardingRun& run,
                                  const std::shared_ptr<distributed::ProcessGroup>& pg);

// One line "b22 key=value ..." for the coordinator, and back.
std::string to_line(const RankMeasurement& m);
std::optional<RankMeasurement> from_line(std::string_view line);

}  // namespace memgrad::examples
