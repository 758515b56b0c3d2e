// train_mlp: the default demo (./memgrad demo). An MLP classifier (784-512-512-10, ReLU) trained
// on Fashion-MNIST, with a progress bar and, at the end, where the memory went during the first
// training step: model init, forward, backward, optimizer step, zero_grad, each expected (from
// shapes and the allocator's 512-byte rounding) next to measured.
//
//   ./memgrad example train_mlp --epochs 3 --optimizer sgd --lr 0.1
//   ./memgrad example train_mlp --device sim:0 --memory-limit 64MiB --accumulate 4
//   ./memgrad lab record -- train_mlp --device sim:0 --epochs 1 --max-steps 2   (a short trace)
//   ./memgrad launch -n 2 -- train_mlp --ddp --epochs 1        (2 ranks, DistributedDataParallel)
//   ./memgrad launch -n 4 -- train_mlp --zero 3 --epochs 1     (4 ranks, ZeRO stage 3)
//
// Under ./memgrad launch with --ddp or --zero every rank trains on its share of each batch
// (examples/common/data_parallel.h); rank 0 prints the progress and the report.
//
// The forward (and the loss) runs in TracePhaseScope("forward") and evaluation in "eval"; autograd
// and the optimizer label backward, optimizer and zero_grad themselves, so a recorded trace says
// which phase every allocation belongs to.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "autograd/autograd.h"
#include "engine/data/data_loader.h"
#include "engine/data/readers.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/common/data_parallel.h"
#include "examples/common/progress.h"
#include "examples/common/report.h"
#include "examples/common/steady_state.h"
#include "examples/common/train_options.h"

using namespace memgrad;
using examples::rounded;

namespace {

constexpr int64_t kHidden = 512;
constexpr int64_t kClasses = 10;

// fc1 -> ReLU -> fc2 -> ReLU -> fc3, as a list of modules so that --checkpoint-segments can
// split it.
class Mlp : public nn::UnaryModule {
 public:
  Mlp(Device device, int64_t checkpoint_segments) : segments_(checkpoint_segments) {
    const nn::LinearOptions o{true, device, kFloat32};
    layers_ = {register_module("fc1", std::make_shared<nn::Linear>(784, kHidden, o)),
               std::make_shared<nn::ReLU>(),
               register_module("fc2", std::make_shared<nn::Linear>(kHidden, kHidden, o)),
               std::make_shared<nn::ReLU>(),
               register_module("fc3", std::make_shared<nn::Linear>(kHidden, kClasses, o))};
  }
  Tensor forward(const Tensor& input) override {
    // The images in the parameters' dtype (--precision master-*: a 16-bit copy).
    const DType dtype = static_cast<const nn::Linear&>(*layers_[0]).weight().dtype();
    const Tensor x = input.dtype() == dtype ? input : input.to(dtype);
    if (segments_ > 0 && is_training()) {
      return autograd::checkpoint_sequential(layers_, segments_, x);
    }
    Tensor h = x;
    for (const auto& layer : layers_) h = (*layer)(h);
    return h;
  }
  std::string name() const override { return "Mlp"; }

 private:
  int64_t segments_;
  std::vector<std::shared_ptr<nn::UnaryModule>> layers_;
};

// Bytes of the parameters as allocated.
int64_t parameter_bytes(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += rounded(static_cast<int64_t>(p.nbytes()));
  return n;
}

// The rows whose largest logit is the target's class (0 on a meta device).
int64_t correct_rows(const Tensor& logits, const Tensor& target) {
  return logits.argmax(1).eq(target).sum().item_or<int64_t>(0);
}

double accuracy_of(const Tensor& logits, const Tensor& target) {
  NoGradGuard no_grad;
  return static_cast<double>(correct_rows(logits, target)) / static_cast<double>(target.numel());
}

double evaluate(nn::UnaryModule& model, const data::Dataset& test, Device device) {
  TracePhaseScope phase("eval");
  NoGradGuard no_grad;
  model.eval();
  data::DataLoader loader(test, {.batch_size = 1000, .device = device});
  int64_t correct = 0, total = 0;
  while (auto batch = loader.next()) {
    const Tensor logits = model(batch->input);
    correct += correct_rows(logits, batch->target);
    total += batch->target.numel();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(total);
}

// The first optimizer step, phase by phase, with the expected memory of each phase.
struct FirstStepReport {
  examples::MemoryReport report{"Memory during the first training step (device allocator):"};
  int64_t params = 0;
  int64_t step_start = 0;  // allocated bytes when the step began
};

}  // namespace

int main(int argc, char** argv) {
  examples::TrainOptions opt;
  CLI::App app{"Train an MLP (784-512-512-10) on Fashion-MNIST and report where memory goes."};
  examples::add_train_flags(app, opt, /*default_epochs=*/10, /*default_batch=*/128);
  app.add_option("--data", opt.data_dir, "Directory with MNIST-format IDX files (.gz or not)");
  int64_t max_steps = 0;
  app.add_option("--max-steps", max_steps,
                 "Stop training after this many optimizer steps (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (opt.describe) {
    fmt::print("{}\n",
               "MLP 784-512-512-10 on Fashion-MNIST with a per-phase memory report (the demo)");
    return 0;
  }

  try {
    const auto start = std::chrono::steady_clock::now();
    manual_seed(opt.seed);
    const Device device = examples::configure_device(opt);
    const examples::Precision precision = examples::precision_of(opt);
    // Quiet on the ranks of a distributed run other than 0 (checked again once the group exists).
    const bool quiet = (opt.ddp || opt.zero != 0) && std::getenv("RANK") != nullptr &&
                       std::string(std::getenv("RANK")) != "0";
    if (!quiet) fmt::print("loading {} ...\n", opt.data_dir);
    const data::MnistSplit mnist = data::load_mnist(opt.data_dir);
    if (!quiet) {
      fmt::print("{} training and {} test images of 28x28, 10 classes\n", mnist.train.size(),
                 mnist.test.size());
    }
    examples::SteadyStateReport steady(device);  // the requests up to the first evaluation
    const int64_t before_model = static_cast<int64_t>(memory_allocated(device));
    if (opt.checkpoint_segments > 5) {
      throw ValueError(
          fmt::format("--checkpoint-segments {}: the MLP has 5 modules", opt.checkpoint_segments),
          "", "--checkpoint-segments", fmt::format("{}", opt.checkpoint_segments));
    }
    auto model_ptr = std::make_shared<Mlp>(device, opt.checkpoint_segments);
    Mlp& model = *model_ptr;
    if (precision.parameters != kFloat32) model.to(precision.parameters);
    FirstStepReport first;
    first.params = parameter_bytes(model);
    first.report.add("after model init (parameters)", first.params,
                     static_cast<int64_t>(memory_allocated(device)) - before_model);
    const int64_t parameter_count = model.num_parameters();  // ZeRO-3 empties the parameters
    const int64_t before_wrap = static_cast<int64_t>(memory_allocated(device));
    examples::DataParallel dp(model_ptr, opt, device);
    if (dp.enabled()) {
      first.report.note(dp.wrap_label(),
                        static_cast<int64_t>(memory_allocated(device)) - before_wrap);
    }
    if (dp.prints()) {
      fmt::print("model: {} parameters on {}{}\n", parameter_count, device.str(),
                 dp.enabled() ? "; " + dp.describe() : std::string());
    }

    const int64_t before_optimizer = static_cast<int64_t>(memory_allocated(device));
    std::unique_ptr<optim::Optimizer> optimizer = examples::make_optimizer(opt, dp.trainable());
    if (precision.master_weights) {
      first.report.add("optimizer (+ float32 master weights)",
                       examples::expected_master_weights(opt, dp.trainable()),
                       static_cast<int64_t>(memory_allocated(device)) - before_optimizer);
    }
    examples::check_batch_size(opt, mnist.train.size());
    data::DataLoader loader(mnist.train, {.batch_size = static_cast<size_t>(opt.batch_size),
                                          .shuffle = true,
                                          .seed = opt.seed,
                                          .drop_last = true,
                                          .device = device});
    const int64_t steps_per_epoch = static_cast<int64_t>(loader.num_batches());
    optim::CosineWithWarmup schedule(*optimizer, std::min<int64_t>(100, steps_per_epoch),
                                     steps_per_epoch * opt.epochs);
    io::TrainingState state;
    if (!opt.resume.empty()) {
      state = io::load_checkpoint(opt.resume, model, *optimizer);
      for (int64_t s = 0; s < state.step; ++s) schedule.step();
      fmt::print("resumed from {} at epoch {} (step {})\n", opt.resume, state.epoch, state.step);
    }

    const int64_t micro = opt.batch_size / opt.accumulate;
    const int64_t rows = micro / dp.world();  // this rank's rows of each micro-batch
    bool report_pending = state.step == 0;
    // The forward/backward expectations below are for the plain float32 step; with
    // checkpointing or another precision those two rows are shown as measured only, and with
    // ZeRO the gradients and the optimizer state (sharded) too.
    const bool plain_step = opt.checkpoint_segments == 0 && precision.name == "fp32";
    const bool plain_grads = plain_step && opt.zero == 0;
    autograd::GradScaler scaler = dp.make_scaler(precision);
    for (int64_t epoch = state.epoch; epoch < opt.epochs; ++epoch) {
      loader.start_epoch(static_cast<size_t>(epoch));
      examples::ProgressBar bar(fmt::format("epoch {}/{}", epoch + 1, opt.epochs), steps_per_epoch,
                                dp.prints());
      double loss_sum = 0.0, acc_sum = 0.0;
      int64_t seen = 0;
      while (auto batch = loader.next()) {
        double step_loss = 0.0, step_acc = 0.0;
        for (int64_t m = 0; m < opt.accumulate; ++m) {
          const Tensor x = dp.rows(batch->input.narrow(0, m * micro, micro));
          const Tensor y = dp.rows(batch->target.narrow(0, m * micro, micro));
          // DDP: the micro-batches before the last accumulate without communicating.
          const auto no_sync = m + 1 < opt.accumulate ? dp.no_sync() : nullptr;
          // Let the loader finish its prefetching so its allocations are not measured below.
          if (report_pending) loader.wait_until_prefetched();
          const int64_t before = static_cast<int64_t>(memory_allocated(device));
          if (report_pending && m == 0) {
            reset_peak_memory_stats(device);
            first.step_start = before;
          }
          Tensor logits, loss;
          {
            TracePhaseScope phase("forward");
            autograd::AutocastGuard autocast(precision.autocast.has_value(),
                                             precision.autocast.value_or(kFloat16));
            logits = dp.module()(x);
            // 16-bit parameters give 16-bit logits: the loss in float32.
            loss = nn::cross_entropy(precision.master_weights ? logits.to(kFloat32) : logits, y);
          }
          const int64_t act = rounded(rows * kHidden * 4);
          const int64_t small = rounded(rows * kClasses * 4);
          if (report_pending && m == 0) {
            // Saved for backward: both ReLU outputs (also the next Linear's inputs) and the
            // log-probabilities; alive besides: the logits, the 0-d loss and (ZeRO-3) the last
            // layer's gathered parameters, which its backward uses first.
            const int64_t measured = static_cast<int64_t>(memory_allocated(device)) - before;
            if (plain_step) {
              first.report.add(
                  opt.zero == 3 ? "forward (+ saved activations, logits, loss, fc3 gathered)"
                                : "forward (+ saved activations, logits, loss)",
                  2 * act + 2 * small + rounded(4) + dp.expected_kept_after_forward(), measured);
            } else {
              first.report.note(
                  fmt::format("forward ({})",
                              opt.checkpoint_segments > 0 ? "checkpointing" : precision.name),
                  measured);
            }
          }
          const int64_t before_backward = static_cast<int64_t>(memory_allocated(device));
          const Tensor scaled =
              opt.accumulate > 1 ? loss / static_cast<double>(opt.accumulate) : loss;
          scaler.scale(scaled).backward();
          if (report_pending && m == 0) {
            const int64_t measured =
                static_cast<int64_t>(memory_allocated(device)) - before_backward;
            if (plain_grads) {
              // (+ the 0-d loss / accumulate, which is still held here when accumulating)
              first.report.add(
                  "backward (+ gradients - saved activations)",
                  first.params - 2 * act - small + (opt.accumulate > 1 ? rounded(4) : 0), measured);
            } else {
              first.report.note(
                  opt.zero != 0
                      ? "backward (ZeRO: gradients into flat or sharded buffers)"
                      : fmt::format("backward ({})",
                                    opt.checkpoint_segments > 0 ? "checkpointing" : precision.name),
                  measured);
            }
          }
          step_loss += loss.item_or(0.0) / static_cast<double>(opt.accumulate);
          step_acc += accuracy_of(logits, y) / static_cast<double>(opt.accumulate);
        }
        const int64_t before_step = static_cast<int64_t>(memory_allocated(device));
        const bool stepped = dp.step(*optimizer, scaler);  // false: an inf/NaN gradient
        scaler.update();
        schedule.step();
        if (report_pending) {
          const int64_t state_bytes =
              stepped ? examples::expected_optimizer_state(opt, dp.trainable()) : 0;
          const int64_t measured = static_cast<int64_t>(memory_allocated(device)) - before_step;
          if (opt.zero == 0) {
            first.report.add(fmt::format("optimizer step (+ {} state, lazily)", opt.optimizer),
                             state_bytes, measured);
          } else {
            first.report.note(
                fmt::format("optimizer step (+ {} state of the shards)", opt.optimizer), measured);
          }
        }
        const int64_t before_zero = static_cast<int64_t>(memory_allocated(device));
        dp.zero_grad(*optimizer);
        if (report_pending) {
          const int64_t measured = static_cast<int64_t>(memory_allocated(device)) - before_zero;
          if (opt.zero == 0) {
            first.report.add("zero_grad(set_to_none=True) (- gradients)", -first.params, measured);
          } else {
            first.report.note("zero_grad (- the shards' gradients)", measured);
          }
          first.report.note("peak during the step, above its start",
                            static_cast<int64_t>(max_memory_allocated(device)) - first.step_start);
          report_pending = false;
        }
        ++state.step;
        ++seen;
        loss_sum += dp.mean(step_loss);
        acc_sum += dp.mean(step_acc);
        bar.update(seen, loss_sum / static_cast<double>(seen), acc_sum / static_cast<double>(seen));
        if (max_steps > 0 && state.step >= max_steps) break;
      }
      steady.finish(state.step);
      const double test_acc = evaluate(dp.module(), mnist.test, device);
      bar.finish(fmt::format(" | test acc {:.2f}%", 100.0 * test_acc));
      state.epoch = epoch + 1;
      if (!opt.save.empty() && dp.rank() == 0) {
        state.generator = default_generator(device).get_state();
        io::save_checkpoint(opt.save, model, *optimizer, state);
      }
    }
    const double test_acc = evaluate(dp.module(), mnist.test, device);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!dp.prints()) {
      // The other ranks stay quiet unless their own first step did not match its expectations.
      if (first.report.all_match()) return 0;
      fmt::print("rank {}:\n", dp.rank());
      first.report.print();
      return 2;
    }
    if (device.is_meta()) {
      fmt::print(
          "\nno accuracy on {}: its tensors have shapes, not values ({} epochs, {:.1f} s)\n\n",
          device.str(), opt.epochs, seconds);
    } else {
      fmt::print("\nfinal test accuracy: {:.2f}% ({} epochs, {:.1f} s)\n\n", 100.0 * test_acc,
                 opt.epochs, seconds);
    }
    if (first.params > 0 && state.step > 0 && opt.resume.empty()) first.report.print();
    fmt::print("\n");
    steady.print();
    fmt::print("\n{}", memory_summary(device, /*abbreviated=*/true));
    return first.report.all_match() ? 0 : 2;
  } catch (const memgrad::Error& e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", e.what());
    return 1;
  }
}
