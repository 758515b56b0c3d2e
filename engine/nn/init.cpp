// Initialisers: in-place fills with grad mode off.
#include "engine/nn/init.h"

#include <cmath>

#include "engine/autograd_seam.h"

namespace memgrad::nn::init {
namespace {

class NoGradScope {
 public:
  NoGradScope() : previous_(grad_mode_enabled()) { set_grad_mode_enabled(false); }
  ~NoGradScope() { set_grad_mode_enabled(previous_); }

 private:
  bool previous_;
};

}  // namespace

void kaiming_uniform_(Tensor& t, double a, int64_t fan_in) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = fan_in > 0 ? gain * std::sqrt(3.0 / static_cast<double>(fan_in)) : 0.0;
  uniform_(t, -bound, bound);
}

void uniform_(Tensor& t, double from, double to) {
  NoGradScope no_grad;
  t.uniform_(from, to);
}

void normal_(Tensor& t, double mean, double std) {
  NoGradScope no_grad;
  t.normal_(mean, std);
}

void zeros_(Tensor& t) {
  NoGradScope no_grad;
  t.zero_();
}

void ones_(Tensor& t) {
  NoGradScope no_grad;
  t.fill_(1.0);
}

}  // namespace memgrad::nn::init
