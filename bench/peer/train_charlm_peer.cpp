// train_charlm_peer: bench/train_charlm_bench.cpp in libtorch (PyTorch 1.13's C++ API): the
// same transformer as examples/charlm (token and position embeddings, 2 pre-norm blocks of
// causal self-attention and a 4x-wide tanh-GELU MLP, a final layer norm, a linear head), the
// same shapes, data recipe, AdamW, step and output names; see train_charlm_bench.cpp for the
// definitions. Each op is the one memgrad's CausalSelfAttention and TransformerBlock run
// (engine/nn/attention.cpp), not a fused libtorch kernel. Dropout is 0, the identity in both
// libraries, so it is left out. libtorch's CPU allocator keeps no statistics, so the peaks of
// allocated and reserved bytes are printed as n/a.
//
//   train_charlm_peer [--quick] [--config]
//
// Run it in the peer's best configuration (tools/run_bench.py sets it; docs/performance.md says
// why): OpenMP OpenBLAS through LD_LIBRARY_PATH, glibc malloc tunables, OPENBLAS_CORETYPE where
// OpenBLAS misdetects the CPU; 2 threads are set here.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "bench/bench_shapes.h"
#include "bench/bench_util.h"
#include "bench/fma_peak.h"
#include "bench/peer/torch_products.h"
#include "bench/peer/torch_same_start.h"
#include "bench/same_start.h"

namespace {

namespace F = torch::nn::functional;

using namespace bench::charlm;

torch::nn::LayerNorm layer_norm() {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth}).eps(1e-5));
}

// x + attn(ln1(x)), then x + mlp(ln2(x)), as nn::TransformerBlock.
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : ln1(register_module("ln1", layer_norm())),
        qkv(register_module("qkv", torch::nn::Linear(kWidth, 3 * kWidth))),
        proj(register_module("proj", torch::nn::Linear(kWidth, kWidth))),
        ln2(register_module("ln2", layer_norm())),
        fc(register_module("fc", torch::nn::Linear(kWidth, 4 * kWidth))),
        out(register_module("out", torch::nn::Linear(4 * kWidth, kWidth))) {
    // Position j is in the future of position i when j > i.
    const torch::Tensor pos = torch::arange(kContext);
    future = register_buffer("future", pos.unsqueeze(0).gt(pos.unsqueeze(1)));
  }
  // x (B, T, C) -> (B, T, C): nn::CausalSelfAttention::forward.
  torch::Tensor attention(const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = kWidth, H = kHeads, D = C / H;
    const std::vector<torch::Tensor> parts = qkv(x).split(C, 2);  // 3 x (B, T, C)
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
    const torch::Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    torch::Tensor att =
        torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
    att = att.masked_fill(future.slice(0, 0, T).slice(1, 0, T),
                          -std::numeric_limits<float>::infinity());
    att = torch::softmax(att, -1);
    const torch::Tensor y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
    return proj(y);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor h = x + attention(ln1(x));
    return h + out(F::gelu(fc(ln2(h)), F::GELUFuncOptions().approximate("tanh")));
  }
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc, out;
  torch::Tensor future;  // (T_max, T_max) bool: true above the diagonal (masked)
};
TORCH_MODULE(Block);

// examples::CharLM: idx (B, T) int64 -> logits (B, T, V).
struct CharLMImpl : torch::nn::Module {
  CharLMImpl()
      : tok(register_module("tok_emb", torch::nn::Embedding(kVocab, kWidth))),
        pos(register_module("pos_emb", torch::nn::Embedding(kContext, kWidth))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", layer_norm())),
        head(register_module("head", torch::nn::Linear(kWidth, kVocab))) {
    for (int64_t l = 0; l < kLayers; ++l) blocks->push_back(Block());
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    const int64_t T = idx.size(1);
    torch::Tensor h = tok(idx) + pos(torch::arange(T, torch::kInt64));
    for (const std::shared_ptr<torch::nn::Module>& block : *blocks) {
      h = block->as<BlockImpl>()->forward(h);
    }
    return head(ln_f(h));
  }
  torch::nn::Embedding tok, pos;
  torch::nn::ModuleList blocks;  // "blocks.0", "blocks.1", as CharLM names them
  torch::nn::LayerNorm ln_f;
  torch::nn::Linear head;
};
TORCH_MODULE(CharLM);

struct Batch {
  torch::Tensor input;
  torch::Tensor target;
};

// examples::charlm_loss: the mean cross-entropy over the B x T positions, and the
// next-character accuracy computed outside autograd (returned only to do the same work).
torch::Tensor charlm_loss(CharLM& model, const Batch& batch, double* accuracy) {
  const torch::Tensor logits = model->forward(batch.input);
  const torch::Tensor flat = logits.reshape({-1, kVocab});
  const torch::Tensor labels = batch.target.reshape({-1});
  torch::Tensor loss = F::cross_entropy(flat, labels);
  torch::NoGradGuard no_grad;
  *accuracy = flat.argmax(1).eq(labels).sum().item<double>() / static_cast<double>(labels.numel());
  return loss;
}

Batch from_window(const torch::Tensor& window) {
  return {window.narrow(1, 0, kContext).contiguous(), window.narrow(1, 1, kContext).contiguous()};
}

torch::optim::AdamW make_optimizer(CharLM& model) {
  return torch::optim::AdamW(
      model->parameters(),
      torch::optim::AdamWOptions(3e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
}

void train_step(CharLM& model, torch::optim::AdamW& optimizer, const Batch& batch,
                torch::Tensor& loss) {
  double accuracy = 0.0;
  model->zero_grad(/*set_to_none=*/true);
  loss = charlm_loss(model, batch, &accuracy);
  loss.backward();
  optimizer.step();
}

bench::same_start::Run same_start_run() {
  namespace ss = bench::same_start;
  CharLM model;
  bench::load_same_start(*model, ss::transformer_shapes(kVocab, kWidth, kLayers, kContext));
  std::vector<Batch> pool;
  for (int b = 0; b < ss::kPoolBatches; ++b) {
    pool.push_back(from_window(
        bench::from_values(ss::integer_values(ss::batch_seed(b), kBatch * (kContext + 1), kVocab),
                           {kBatch, kContext + 1})));
  }
  torch::optim::AdamW optimizer = make_optimizer(model);
  std::vector<double> losses = ss::losses_over_steps<torch::Tensor>(
      pool,
      [&](const Batch& batch, torch::Tensor& loss) { train_step(model, optimizer, batch, loss); });
  return {losses, bench::weight_norm(*model)};
}

int run(const bench::Flags& flags) {
  const double startup_rss = bench::peak_rss_mib();
  torch::set_num_threads(bench::kThreads);
  bench::print_config("libtorch " TORCH_VERSION, torch::get_num_threads());
  if (flags.config_only) return 0;
  torch::manual_seed(0);
  std::vector<Batch> pool;
  for (int i = 0; i < kPoolBatches; ++i) {
    pool.push_back(from_window(torch::randint(0, kVocab, {kBatch, kContext + 1})));
  }
  CharLM model;
  torch::optim::AdamW optimizer = make_optimizer(model);
  torch::Tensor loss;
  bench::StepsAndPeak timed = bench::time_training_steps_and_peak(flags, [&](int s) {
    train_step(model, optimizer, pool[static_cast<size_t>(s % kPoolBatches)], loss);
  });
  bench::report_training("charlm", {std::move(timed.step_ms), std::nullopt, std::nullopt,
                                    startup_rss, loss.item<double>()});
  const std::vector<bench::GemmShape> gemms =
      bench::transformer_step_gemms(kVocab, kWidth, kLayers, kHeads, kContext, kBatch);
  bench::report_fma_bound("charlm", bench::gemm_flops(gemms), timed.peak_gflops);
  bench::report("charlm_step_gemms", bench::time_step_gemms(gemms, bench::torch_products()), "ms");
  bench::same_start::report_run("charlm", same_start_run());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, "train_charlm_peer", run); }
