// The small layers, one header each; this umbrella includes them all so `#include
// "engine/nn/layers.h"` keeps giving Embedding, LayerNorm, Dropout, the activations (ReLU, GELU,
// Tanh, SiLU) and Sequential. Each header states its layer's memory: which parameters it
// allocates at construction and what its forward allocates and saves.
#pragma once

#include "engine/nn/clip_grad.h"
#include "engine/nn/dropout.h"
#include "engine/nn/embedding.h"
#include "engine/nn/gelu.h"
#include "engine/nn/layer_norm.h"
#include "engine/nn/relu.h"
#include "engine/nn/sequential.h"
#include "engine/nn/silu.h"
#include "engine/nn/tanh.h"
