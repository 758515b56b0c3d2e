// Parameter initialisation, in place and outside grad mode (torch.nn.init). Each draws from the
// device's default generator, so a manual_seed() makes models reproducible.
#pragma once

#include "engine/tensor.h"

namespace memgrad::nn::init {

// U(-bound, bound) with bound = gain sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)): PyTorch's
// kaiming_uniform_ (Linear uses a = sqrt(5), i.e. bound = 1 / sqrt(fan_in)).
void kaiming_uniform_(Tensor& t, double a, int64_t fan_in);
void uniform_(Tensor& t, double from, double to);
void normal_(Tensor& t, double mean = 0.0, double std = 1.0);
void zeros_(Tensor& t);
void ones_(Tensor& t);

}  // namespace memgrad::nn::init
