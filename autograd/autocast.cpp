// Autocast regions, the per-op policy and the parameter cast cache.
#include "autograd/autocast.h"

#include <functional>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "engine/autograd_seam.h"
#include "engine/copy.h"
#include "engine/error.h"

namespace memgrad::autograd {
namespace {

enum class Policy { None, LowerPrecision, Float32, Promote };

Policy policy_of(OpKind kind) {
  switch (kind) {
    case OpKind::Mm:
    case OpKind::Bmm:
    case OpKind::Matmul:
    case OpKind::Addmm:
    case OpKind::Linear: return Policy::LowerPrecision;
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Pow:
    case OpKind::PowScalar:
    case OpKind::Reciprocal:
    case OpKind::Rsqrt:
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Norm:
    case OpKind::LogSumExp:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::LayerNorm:
    case OpKind::CrossEntropy:
    case OpKind::MseLoss: return Policy::Float32;
    case OpKind::Cat:
    case OpKind::Where: return Policy::Promote;
    default: return Policy::None;
  }
}

// A parameter and the dtype it was cast to: nested regions of float16 and bfloat16 each find
// their own cast, never the other's.
struct CacheKey {
  const TensorImpl* source;
  DType dtype;
  bool operator==(const CacheKey&) const = default;
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& key) const {
    return std::hash<const TensorImpl*>()(key.source) ^
           (static_cast<size_t>(key.dtype) * 0x9E3779B97F4A7C15ull);
  }
};

struct CacheEntry {
  std::weak_ptr<TensorImpl> source;  // to tell a reused address from the same tensor
  Tensor cast;
};

struct ThreadState {
  DType dtype = kFloat16;
  int depth = 0;  // nesting of enabled regions
  std::unordered_map<CacheKey, CacheEntry, CacheKeyHash> cache;
};

thread_local ThreadState t_state;

bool is_cacheable(const Tensor& t) { return t.requires_grad() && t.is_leaf() && !t.is_view(); }

// t in `dtype`, through the cache for parameters.
Tensor cast(const Tensor& t, DType dtype) {
  if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) return t;
  // Cache only inside a counted region (its exit clears the cache); checkpoint's recomputation
  // restores the enabled flag without a region and so casts afresh.
  if (dtype != t_state.dtype || t_state.depth == 0 || !is_cacheable(t)) return to_dtype(t, dtype);
  const CacheKey key{t.impl(), dtype};
  auto it = t_state.cache.find(key);
  if (it != t_state.cache.end() && it->second.source.lock() == t.impl_ptr()) return it->second.cast;
  // The cached cast is recorded even under no_grad (a checkpointed segment's forward, an
  // evaluation pass), since it outlives that scope: a later use in grad mode in the same region
  // (the segment's recomputation when backward runs inside the region) must still reach the
  // parameter. The cast saves nothing, so this costs no memory (the approach of
  // pytorch/pytorch#165068 for the same cache).
  Tensor out;
  {
    EnableGradGuard grad;
    out = to_dtype(t, dtype);
  }
  t_state.cache[key] = CacheEntry{t.impl_ptr(), out};
  return out;
}

}  // namespace

AutocastGuard::AutocastGuard(bool enabled, DType dtype)
    : previous_enabled_(autocast_enabled()), previous_dtype_(t_state.dtype) {
  if (enabled && !is_reduced_float(dtype)) {
    throw DTypeError(fmt::format("[autocast] the lower-precision dtype must be float16 or "
                                 "bfloat16, got {}",
                                 dtype_name(dtype)),
                     "autocast", {dtype});
  }
  set_autocast_enabled(enabled);
  if (enabled) {
    t_state.dtype = dtype;
    ++t_state.depth;
  }
}

AutocastGuard::~AutocastGuard() {
  if (autocast_enabled() && --t_state.depth == 0) t_state.cache.clear();
  set_autocast_enabled(previous_enabled_);
  t_state.dtype = previous_dtype_;
}

AutocastState autocast_state() { return {autocast_enabled(), t_state.dtype}; }

AutocastStateGuard::AutocastStateGuard(AutocastState state) : previous_(autocast_state()) {
  set_autocast_enabled(state.enabled);
  t_state.dtype = state.dtype;
}

AutocastStateGuard::~AutocastStateGuard() {
  set_autocast_enabled(previous_.enabled);
  t_state.dtype = previous_.dtype;
}

size_t autocast_cache_size() { return t_state.cache.size(); }

bool apply_autocast(OpKind kind, std::vector<Tensor>& inputs) {
  const Policy policy = policy_of(kind);
  if (policy == Policy::None) return false;
  DType target = t_state.dtype;
  if (policy == Policy::Float32) target = kFloat32;
  if (policy == Policy::Promote) {
    target = t_state.dtype;
    for (const Tensor& t : inputs) {
      if (t.defined() && is_floating(t.dtype())) target = promote_types(target, t.dtype());
    }
  }
  bool changed = false;
  for (Tensor& t : inputs) {
    // float64 is never autocast (as in PyTorch, only float32 and float16 are eligible).
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == target || t.dtype() == kFloat64) {
      continue;
    }
    t = cast(t, target);
    changed = true;
  }
  return changed;
}

}  // namespace memgrad::autograd
