// train_charlm: a small character-level transformer (GPT-2 layout) trained on a text file, then
// sampling text. By default the text is the licence collection every Debian machine has in
// /usr/share/common-licenses (about 300 KB of English). Batches are generated on demand from
// random offsets, so the data set costs nothing but the encoded text.
//
//   ./memgrad example train_charlm --steps 300 --context 64 --width 128 --layers 2
//   ./memgrad example train_charlm --text my_book.txt --device sim:0 --memory-limit 512MiB
//   ./memgrad lab record -- train_charlm --device sim:0 --steps 2 --sample-length 0
//   ./memgrad example train_charlm --context-study   # forward memory at 1x, 2x, 4x the context
//   ./memgrad launch -n 2 -- train_charlm --ddp --steps 100     # data parallel on 2 ranks
//   ./memgrad launch -n 4 -- train_charlm --zero 2 --steps 100  # ZeRO stage 2 on 4 ranks
//
// The report after training splits what the first forward keeps for backward into its parts,
// each expected from the shapes (examples/charlm/forward_memory.h, docs/transformer-memory.md).
// The progress line's "acc" is the next-character accuracy (argmax over the batch).
//
// Trace phases: "forward" (set here), "backward", "optimizer", "zero_grad" (autograd and the
// optimizer), "eval" and "sample".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "autograd/autograd.h"
#include "engine/data/data_loader.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/attention.h"
#include "engine/nn/functional.h"
#include "engine/optim/optimizer.h"
#include "examples/charlm/charlm_model.h"
#include "examples/charlm/forward_memory.h"
#include "examples/common/data_parallel.h"
#include "examples/common/progress.h"
#include "examples/common/report.h"
#include "examples/common/steady_state.h"
#include "examples/common/train_options.h"

using namespace memgrad;
using examples::CharLM;
using examples::rounded;

namespace {

constexpr const char* kDefaultTextDir = "/usr/share/common-licenses";

struct Corpus {
  std::string vocab;                 // the distinct characters, sorted
  std::array<int64_t, 256> index{};  // character -> token
  Tensor tokens;                     // (N) int64
};

std::string read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::string text;
  auto append = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  };
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path)) {
      if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) append(f);
  } else if (fs::is_regular_file(path)) {
    append(path);
  }
  if (text.size() < 1000) {
    throw ValueError(fmt::format("[train_charlm] '{}' holds {} bytes of text; at least 1000 are "
                                 "needed (give --text FILE)",
                                 path, text.size()),
                     "train_charlm", "--text", path);
  }
  return text;
}

Corpus encode(const std::string& text) {
  Corpus c;
  std::array<bool, 256> seen{};
  for (unsigned char ch : text) seen[ch] = true;
  for (int ch = 0; ch < 256; ++ch) {
    if (seen[static_cast<size_t>(ch)]) {
      c.index[static_cast<size_t>(ch)] = static_cast<int64_t>(c.vocab.size());
      c.vocab.push_back(static_cast<char>(ch));
    }
  }
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = c.index[static_cast<unsigned char>(text[i])];
  c.tokens = from_vector(ids, {static_cast<int64_t>(ids.size())});
  return c;
}

// Item i: a context of T tokens and the same shifted by one, from an offset that depends only
// on (seed, i): nothing is stored per item.
class RandomWindows final : public data::Dataset {
 public:
  RandomWindows(Tensor tokens, int64_t begin, int64_t end, int64_t context, size_t items,
                uint64_t seed)
      : tokens_(std::move(tokens)),
        begin_(begin),
        end_(end),
        context_(context),
        items_(items),
        seed_(seed) {}
  size_t size() const override { return items_; }
  data::Example get(size_t i) const override {
    uint64_t z = seed_ + 0x9E3779B97F4A7C15ull * (i + 1);  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const auto span = static_cast<uint64_t>(end_ - begin_ - context_ - 1);
    const int64_t o = begin_ + static_cast<int64_t>(z % span);
    return {tokens_.narrow(0, o, context_), tokens_.narrow(0, o + 1, context_)};
  }

 private:
  Tensor tokens_;
  int64_t begin_, end_, context_;
  size_t items_;
  uint64_t seed_;
};

// The validation loss: each rank evaluates its rows of every batch, as it trains (so it holds
// no more than in training, ZeRO-3's gathered units included), and the ranks' means are
// averaged: the loss of one process evaluating whole batches.
double evaluate(CharLM& model, const data::Dataset& val, Device device, int64_t batch,
                const examples::DataParallel& dp) {
  TracePhaseScope phase("eval");
  NoGradGuard no_grad;
  model.eval();
  data::DataLoader loader(val, {.batch_size = static_cast<size_t>(batch), .device = device});
  double sum = 0.0;
  int64_t n = 0;
  while (auto b = loader.next()) {
    sum += examples::charlm_loss(model, dp.rows(b->input), dp.rows(b->target), false)
               .loss.item_or(0.0);
    ++n;
  }
  model.train();
  return dp.mean(sum / static_cast<double>(std::max<int64_t>(n, 1)));
}

// Samples `length` characters after `prompt` at temperature `temperature`.
std::string sample(CharLM& model, const Corpus& corpus, const std::string& prompt, int64_t length,
                   double temperature, Device device) {
  TracePhaseScope phase("sample");
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> ids;
  for (unsigned char ch : prompt) ids.push_back(corpus.index[ch]);
  std::string out = prompt;
  for (int64_t i = 0; i < length; ++i) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - model.context());
    const std::vector<int64_t> window(ids.begin() + start, ids.end());
    const Tensor idx = from_vector(window, {1, static_cast<int64_t>(window.size())}).to(device);
    const Tensor logits = model.forward(idx).select(1, -1).select(0, 0);
    const std::vector<double> probs = softmax(logits / temperature, 0).to_vector<double>();
    const double u = rand({1}).item<double>();
    double acc = 0.0;
    size_t pick = probs.size() - 1;
    for (size_t k = 0; k < probs.size(); ++k) {
      acc += probs[k];
      if (u < acc) {
        pick = k;
        break;
      }
    }
    ids.push_back(static_cast<int64_t>(pick));
    out += corpus.vocab[pick];
  }
  model.train();
  return out;
}

// What one forward keeps at 1x, 2x and 4x the context: the attention probabilities grow 4x per
// doubling, everything else 2x.
int print_context_study(const examples::CharLMShape& shape, int64_t batch, Device device) {
  const std::vector<int64_t> contexts{shape.context, 2 * shape.context, 4 * shape.context};
  const std::vector<examples::ContextPoint> points =
      examples::context_growth(shape, batch, contexts, device);
  examples::MemoryReport report(fmt::format(
      "What one training forward keeps for backward at three context lengths (batch {}, width "
      "{}, {} blocks, {} heads):",
      batch, shape.width, shape.layers, shape.heads));
  for (const examples::ContextPoint& p : points) {
    report.add(fmt::format("context {:>4}: attention probabilities (B, H, T, T)", p.context),
               p.expected_attention, p.attention);
    report.add(fmt::format("context {:>4}: everything else", p.context), p.expected_rest, p.rest);
  }
  report.print();
  fmt::print("\n");
  for (size_t i = 1; i < points.size(); ++i) {
    const auto ratio = [](int64_t a, int64_t b) {
      return static_cast<double>(a) / static_cast<double>(b);
    };
    fmt::print("context {} -> {}: attention x{:.2f}, everything else x{:.2f}\n",
               points[i - 1].context, points[i].context,
               ratio(points[i].attention, points[i - 1].attention),
               ratio(points[i].rest, points[i - 1].rest));
  }
  const examples::ContextPoint& last = points.back();
  fmt::print(
      "\nconclusion: each doubling of the context multiplies the attention probabilities "
      "by 4 (B x H x T x T floats per block) and everything else by about 2, so at "
      "context {} the attention is {:.0f}% of what the forward keeps.\n",
      last.context,
      100.0 * static_cast<double>(last.attention) /
          static_cast<double>(last.attention + last.rest));
  return report.all_match() ? 0 : 2;
}

// The forward's parts as report rows, then their sum against the allocator's count. With
// dropout the masks are not in the expectations: the rows are shown as measured only. ZeRO-3
// keeps the head's parameters gathered for its backward (saved by no node, but no leak).
void add_forward_rows(examples::MemoryReport& report, examples::ForwardMemory kept, double dropout,
                      const examples::DataParallel& dp) {
  for (const examples::ForwardPart& part : kept.parts) {
    if (part.expected == 0 && part.measured == 0 && part.what != "anything else saved") continue;
    if (dropout > 0.0) {
      report.note("forward: " + part.what, part.measured);
    } else {
      report.add("forward: " + part.what, part.expected, part.measured);
    }
  }
  report.add("forward: the loss (0-d)", rounded(4), kept.loss);
  report.add("forward: cached blocks served whole (<= 1 MiB left over)", kept.expected_served_whole,
             kept.served_whole);
  if (dp.expected_kept_after_forward() != 0 || dp.kept_after_forward() != 0) {
    report.add("forward: ZeRO-3: the head's parameters, gathered for its backward",
               dp.expected_kept_after_forward(), dp.kept_after_forward());
    kept.unaccounted -= dp.kept_after_forward();
    kept.expected_total += dp.expected_kept_after_forward();
  }
  report.add("forward: kept but saved by no node (a leak if not 0)", 0, kept.unaccounted);
  if (dropout > 0.0) {
    report.note("forward (+ everything saved for backward, the loss)", kept.measured_total);
  } else {
    report.add("forward (+ everything saved for backward, the loss)", kept.expected_total,
               kept.measured_total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  examples::TrainOptions opt;
  int64_t steps = 300, context = 64, width = 128, layers = 2, heads = 4, sample_length = 200;
  double dropout = 0.0;
  std::string text_path = kDefaultTextDir;
  CLI::App app{"Train a small character-level transformer on a text and sample from it."};
  examples::add_train_flags(app, opt, /*default_epochs=*/1, /*default_batch=*/32);
  app.add_option("--steps", steps, "Optimizer steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--context", context, "Context length (tokens)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--width", width, "Model width (embedding size)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--layers", layers, "Transformer blocks (GPT-2 XL has 48)")
      ->capture_default_str()
      ->check(CLI::Range(1, 128));
  app.add_option("--heads", heads, "Attention heads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--dropout", dropout, "Dropout probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--text", text_path, "A text file or a directory of text files")
      ->capture_default_str();
  app.add_option("--sample-length", sample_length, "Characters to sample at the end")
      ->capture_default_str();
  bool context_study = false;
  app.add_flag("--context-study", context_study,
               "Measure what one forward keeps at 1x, 2x and 4x --context, without training");
  CLI11_PARSE(app, argc, argv);
  if (opt.describe) {
    fmt::print("{}\n", "a small character-level transformer trained on a text, then sampling");
    return 0;
  }

  try {
    const auto start = std::chrono::steady_clock::now();
    manual_seed(opt.seed);
    const Corpus corpus = encode(read_text(text_path));
    const int64_t n = corpus.tokens.numel();
    const int64_t split = n * 9 / 10;
    // Quiet on the ranks of a distributed run other than 0.
    const bool quiet = (opt.ddp || opt.zero != 0) && std::getenv("RANK") != nullptr &&
                       std::string(std::getenv("RANK")) != "0";
    if (!quiet) {
      fmt::print("text: {} characters from {}, vocabulary of {}\n", n, text_path,
                 corpus.vocab.size());
    }
    const Device device = examples::configure_device(opt);
    const examples::Precision precision = examples::precision_of(opt);
    examples::SteadyStateReport steady(device);  // the requests up to the validation
    const Tensor tokens = [&] {
      TraceLabelScope label("data loading");  // the whole text on the device: every step's input
      return corpus.tokens.to(device);
    }();
    const int64_t before_model = static_cast<int64_t>(memory_allocated(device));
    if (opt.checkpoint_segments > layers) {
      throw ValueError(fmt::format("--checkpoint-segments {} exceeds --layers {}",
                                   opt.checkpoint_segments, layers),
                       "", "--checkpoint-segments", fmt::format("{}", opt.checkpoint_segments));
    }
    const examples::CharLMShape shape{static_cast<int64_t>(corpus.vocab.size()), width, layers,
                                      heads, context};
    if (context_study) return print_context_study(shape, opt.batch_size, device);
    auto model_ptr = std::make_shared<CharLM>(shape, dropout, opt.checkpoint_segments, device);
    CharLM& model = *model_ptr;
    if (precision.parameters != kFloat32) model.to(precision.parameters);
    examples::MemoryReport report("Memory during the first training step (device allocator):");
    int64_t params = 0;
    for (const Tensor& p : model.parameters()) params += rounded(static_cast<int64_t>(p.nbytes()));
    int64_t buffers = 0;
    for (const auto& [name, b] : model.named_buffers())
      buffers += rounded(static_cast<int64_t>(b.nbytes()));
    report.add("after model init (parameters + causal masks)", params + buffers,
               static_cast<int64_t>(memory_allocated(device)) - before_model);
    const int64_t parameter_count = model.num_parameters();  // ZeRO-3 empties the parameters
    const int64_t before_wrap = static_cast<int64_t>(memory_allocated(device));
    examples::DataParallel dp(model_ptr, opt, device);
    if (dp.enabled()) {
      report.note(dp.wrap_label(), static_cast<int64_t>(memory_allocated(device)) - before_wrap);
    }
    // With ZeRO the gradients and the optimizer state are sharded: those rows are measured only.
    const bool sharded = opt.zero != 0;
    if (dp.prints()) {
      fmt::print("model: {} parameters, {} blocks of width {}, {} heads, context {}{}\n",
                 parameter_count, layers, width, heads, context,
                 dp.enabled() ? "; " + dp.describe() : std::string());
    }

    examples::TrainOptions o = opt;
    if (o.optimizer == "adam") o.optimizer = "adamw";
    if (o.lr == 0.0) o.lr = 3e-3;
    const int64_t before_optimizer = static_cast<int64_t>(memory_allocated(device));
    std::unique_ptr<optim::Optimizer> optimizer = examples::make_optimizer(o, dp.trainable());
    if (precision.master_weights) {
      report.add("optimizer (+ float32 master weights)",
                 examples::expected_master_weights(o, dp.trainable()),
                 static_cast<int64_t>(memory_allocated(device)) - before_optimizer);
    }
    optim::CosineWithWarmup schedule(*optimizer, std::min<int64_t>(30, steps), steps, o.lr / 10);
    RandomWindows train(tokens, 0, split, context, static_cast<size_t>(steps * opt.batch_size),
                        opt.seed);
    RandomWindows val(tokens, split, n, context, static_cast<size_t>(8 * opt.batch_size),
                      opt.seed + 1);
    data::DataLoader loader(train,
                            {.batch_size = static_cast<size_t>(opt.batch_size), .device = device});
    autograd::GradScaler scaler = dp.make_scaler(precision);
    examples::ProgressBar bar("training", steps, dp.prints());
    double loss_avg = 0.0, accuracy_avg = 0.0;
    const examples::ForwardMode mode{precision.autocast.has_value(), opt.checkpoint_segments,
                                     precision.autocast.value_or(kFloat16)};
    for (int64_t step = 0; step < steps; ++step) {
      const std::optional<data::Example> global = loader.next();
      const bool first = step == 0;
      if (first) loader.wait_until_prefetched();
      // This rank's rows of the global batch (all of it in one process).
      const std::optional<data::Example> batch =
          data::Example{dp.rows(global->input), dp.rows(global->target)};
      const int64_t before = static_cast<int64_t>(memory_allocated(device));
      examples::LossAndAccuracy result;
      {
        TracePhaseScope phase("forward");  // autograd and the optimizer label the other phases
        if (first && !precision.master_weights) {
          // The first forward runs under the census: each part of what it keeps, expected and
          // measured, and their sum against the allocator's count (the census knows float32
          // models, with or without autocast; a 16-bit model's forward is measured only).
          const examples::ForwardMemory kept =
              examples::measure_forward(model, batch->input, batch->target, mode, &result);
          add_forward_rows(report, kept, dropout, dp);
        } else {
          result =
              examples::charlm_loss(model, batch->input, batch->target, mode.amp, mode.amp_dtype);
        }
      }
      if (first && precision.master_weights) {
        report.note(fmt::format("forward ({}: 16-bit activations, float32 loss)", precision.name),
                    static_cast<int64_t>(memory_allocated(device)) - before);
      }
      const Tensor& loss = result.loss;
      const int64_t forward = static_cast<int64_t>(memory_allocated(device)) - before;
      scaler.scale(loss).backward();
      const int64_t backward = static_cast<int64_t>(memory_allocated(device)) - before - forward;
      if (first) {
        // Everything forward allocated except the 0-d loss is saved for backward, and backward
        // frees all of it while it allocates the gradients.
        if (sharded) {
          report.note("backward (ZeRO: gradients into flat or sharded buffers)", backward);
        } else {
          report.add("backward (+ gradients - what forward saved)", params - (forward - rounded(4)),
                     backward);
        }
      }
      const int64_t before_step = static_cast<int64_t>(memory_allocated(device));
      const bool stepped = dp.step(*optimizer, scaler);
      scaler.update();
      schedule.step();
      if (first) {
        const int64_t measured = static_cast<int64_t>(memory_allocated(device)) - before_step;
        if (sharded) {
          report.note("optimizer step (+ AdamW state of the shards)", measured);
        } else {
          report.add("optimizer step (+ AdamW state, lazily)",
                     stepped ? examples::expected_optimizer_state(o, dp.trainable()) : 0, measured);
        }
      }
      const int64_t before_zero = static_cast<int64_t>(memory_allocated(device));
      dp.zero_grad(*optimizer);
      if (first) {
        const int64_t measured = static_cast<int64_t>(memory_allocated(device)) - before_zero;
        if (sharded) {
          report.note("zero_grad (- the shards' gradients)", measured);
        } else {
          report.add("zero_grad (- gradients)", -params, measured);
        }
      }
      const double l = dp.mean(loss.item_or(0.0));
      loss_avg = step == 0 ? l : 0.95 * loss_avg + 0.05 * l;
      const double a = dp.mean(result.accuracy);
      accuracy_avg = step == 0 ? a : 0.95 * accuracy_avg + 0.05 * a;
      // acc: the share of next characters the model's argmax gets right (running average).
      bar.update(step + 1, loss_avg, accuracy_avg);
    }
    bar.finish();
    steady.finish(steps);
    const double val_loss = evaluate(model, val, device, opt.batch_size, dp);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Every rank samples (ZeRO-3's forward gathers collectively); rank 0 prints.
    // Sampling picks characters by their probabilities: there are none on a meta device.
    const std::string text = device.is_meta()
                                 ? fmt::format("(none: {} has no values)", device.str())
                                 : sample(model, corpus, "The ", sample_length, 0.8, device);
    if (!dp.prints()) {
      // The other ranks stay quiet unless their own first step did not match its expectations.
      if (report.all_match()) return 0;
      fmt::print("rank {}:\n", dp.rank());
      report.print();
      return 2;
    }
    fmt::print(
        "validation loss {:.3f} (a uniform guess over {} characters scores {:.3f}); {:.1f} s\n\n",
        val_loss, corpus.vocab.size(), std::log(static_cast<double>(corpus.vocab.size())), seconds);
    fmt::print("sample (temperature 0.8):\n{}\n\n", text);
    report.print();
    fmt::print("\n");
    steady.print();
    return report.all_match() ? 0 : 2;
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "train_charlm: error: %s\n", e.what());
    return 1;
  }
}
