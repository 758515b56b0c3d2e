// Initialisers: in-place fills with grad mode off.
#include "engine/nn/init.h"

#include <cmath>

#include "engine/autograd_seam.h"

namespace memgrad::nn::init {
namespace {}  // namespace

void kaiming_uniform_(Tensor& t, double a, int64_t fan_in) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = fan_in > 0 ? gain * std::sqrt(3.0 / static_cast<double>(fan_in)) : 0.0;
  init::uniform_(t, -bound, bound);  // not memgrad::uniform_, which ADL also finds
}

void uniform_(Tensor& t, double from, double to) {
  GradModeGuard no_grad(false);
  t.uniform_(from, to);
}

void normal_(Tensor& t, double mean, double std) {
  GradModeGuard no_grad(false);
  t.normal_(mean, std);
}

void zeros_(Tensor& t) {
  GradModeGuard no_grad(false);
  t.zero_();
}

void ones_(Tensor& t) {
  GradModeGuard no_grad(false);
  t.fill_(1.0);
}

}  // namespace memgrad::nn::init
