// sharding_tool: B22's expected model states per rank (examples/behaviours/b22_tensor_sharding.h)
// for train_charlm's model, so that tests/tools/estimate_test.py can hold `./memgrad estimate`'s
// "model states" line against them.
//
//   sharding_tool VOCAB WIDTH LAYERS HEADS CONTEXT PRECISION MODE N
//
// PRECISION: fp32, master-fp16 or master-bf16 (AdamW, as train_charlm trains); MODE: ddp,
// zero1, zero2 or zero3. Builds the model and its optimizer on meta:0 (shapes only), reads the
// units and the bytes per element from them, and prints
//   parameters P, gradients G, optimizer state K
// (bytes for one rank; DDP's buckets counted with the gradients, as estimate counts them).
// Exits 0; 1 with the message of a memgrad::Error; 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/b22_tensor_sharding.h"
#include "examples/charlm/charlm_model.h"

using namespace memgrad;
using namespace memgrad::examples;

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr,
                 "usage: sharding_tool VOCAB WIDTH LAYERS HEADS CONTEXT PRECISION MODE N\n");
    return 2;
  }
  const CharLMShape shape{std::atoll(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]),
                          std::atoll(argv[4]), std::atoll(argv[5])};
  const std::string precision = argv[6];
  const std::optional<Sharding> mode = sharding_from_key(argv[7]);
  const int world = std::atoi(argv[8]);
  if (!mode || world < 1 || (precision != "fp32" && !precision.starts_with("master-"))) {
    std::fprintf(stderr, "sharding_tool: bad precision, mode or N\n");
    return 2;
  }
  try {
    CharLM model(shape, 0.0, 0, Device("meta:0"));
    if (precision != "fp32") model.to(precision == "master-bf16" ? kBFloat16 : kFloat16);
    const optim::AdamW optimizer(model.parameters(),
                                 {.lr = 3e-3, .master_weights = precision != "fp32"});
    const ShardingBytes b =
        expected_sharding_bytes(*mode, world, model_shape(model), state_bytes_of(optimizer));
    fmt::print("parameters {}, gradients {}, optimizer state {}\n", b.parameters,
               b.gradients + b.buckets, b.optimizer_state);
    return 0;
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "sharding_tool: error: %s\n", e.what());
    return 1;
  }
}
