// A one-line progress bar for training loops: "epoch 2/10 [#####-----] 235/469 loss 0.41 acc
// 85.3% 1.2s". Both metrics are running averages over the batches: the loss, and the accuracy
// (the share of predictions whose argmax is the label: images for train_mlp, next characters for
// train_charlm). On a terminal, or with MEMGRAD_PROGRESS=live (which ./memgrad launch sets for
// its ranks, whose stdout is a pipe), it redraws in place ("\r" and the line, at each percent);
// otherwise (logs, docs) it prints one line per epoch so the output stays readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace memgrad::examples {

class ProgressBar {
 public:
  // `enabled` false: prints nothing (the ranks of a distributed run other than rank 0).
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  // Updates the bar after `done` of `total` items with the running metrics.
  void update(int64_t done, double loss, double accuracy);
  // Finishes the line (prints the final state once on non-terminals).
  void finish(const std::string& suffix = "");

 private:
  std::string line(int64_t done, double loss, double accuracy) const;
  std::string label_;
  int64_t total_;
  bool tty_;
  bool enabled_;
  int64_t last_percent_ = -1;
  double loss_ = 0.0, accuracy_ = 0.0;
  int64_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace memgrad::examples
