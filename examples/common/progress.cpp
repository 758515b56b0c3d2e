// The progress bar.
#include "examples/common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace memgrad::examples {
namespace {

// MEMGRAD_PROGRESS=live: redraw as on a terminal though stdout is a pipe (./memgrad launch sets
// it, and shows the redraws as they come).
bool live_requested() {
  const char* mode = std::getenv("MEMGRAD_PROGRESS");
  return mode != nullptr && std::strcmp(mode, "live") == 0;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDOUT_FILENO) != 0 || live_requested()),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::line(int64_t done, double loss, double accuracy) const {
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return fmt::format("{} [{}{}] {}/{} loss {:.4f} acc {:.1f}% {:.1f}s", label_,
                     std::string(static_cast<size_t>(filled), '#'),
                     std::string(static_cast<size_t>(kWidth - filled), '-'), done, total_, loss,
                     100.0 * accuracy, seconds);
}

void ProgressBar::update(int64_t done, double loss, double accuracy) {
  done_ = done;
  loss_ = loss;
  accuracy_ = accuracy;
  if (!tty_ || !enabled_) return;
  const int64_t percent = total_ > 0 ? 100 * done / total_ : 100;
  if (percent == last_percent_) return;
  last_percent_ = percent;
  fmt::print("\r{}", line(done, loss, accuracy));
  std::fflush(stdout);
}

void ProgressBar::finish(const std::string& suffix) {
  if (!enabled_) return;
  fmt::print("{}{}{}\n", tty_ ? "\r" : "", line(done_, loss_, accuracy_), suffix);
  std::fflush(stdout);
}

}  // namespace memgrad::examples
