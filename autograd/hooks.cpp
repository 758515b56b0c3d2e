// Tensor hooks and the thread-local stack of saved-tensor hooks.
#include "autograd/hooks.h"

#include <vector>

#include <fmt/format.h>

#include "autograd/error.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace memgrad::autograd {
namespace {

thread_local std::vector<SavedTensorHooks> t_saved_hooks;

// What save_on_host's pack hook keeps: the host copy and where it came from.
struct HostCopy {
  Tensor tensor;
  Device device;
};

}  // namespace

size_t register_hook(const Tensor& t, GradHook hook) {
  if (!t.requires_grad()) {
    throw AutogradError("cannot register a hook on a tensor that doesn't require gradient");
  }
  AutogradMeta* meta = t.impl()->autograd_meta();
  if (meta->grad_fn) {
    auto& hooks = meta->grad_fn->output_hooks();
    hooks.emplace_back(meta->output_nr, std::move(hook));
    return hooks.size() - 1;
  }
  meta->hooks.push_back(std::move(hook));
  return meta->hooks.size() - 1;
}

SavedTensorHooksGuard::SavedTensorHooksGuard(PackHook pack, UnpackHook unpack) {
  if (!pack || !unpack) {
    throw AutogradError(
        fmt::format("saved_tensors_hooks needs both hooks; got pack {} and unpack {}",
                    pack ? "set" : "empty", unpack ? "set" : "empty"));
  }
  t_saved_hooks.push_back({std::move(pack), std::move(unpack)});
}

SavedTensorHooksGuard::~SavedTensorHooksGuard() { t_saved_hooks.pop_back(); }

const SavedTensorHooks* current_saved_tensor_hooks() {
  return t_saved_hooks.empty() ? nullptr : &t_saved_hooks.back();
}

SaveOnHostGuard::SaveOnHostGuard(bool pin_memory)
    : guard_(
          [pin_memory](const Tensor& t) -> std::any {
            NoGradGuard no_grad;  // the copies are storage moves, not ops to differentiate
            if (t.device().is_cpu()) return HostCopy{t, t.device()};
            Tensor host = pin_memory ? t.to(kCPU).pin_memory() : t.to(kCPU);
            return HostCopy{host, t.device()};
          },
          [](const std::any& packed) -> Tensor {
            NoGradGuard no_grad;
            const auto& copy = std::any_cast<const HostCopy&>(packed);
            return copy.tensor.to(copy.device, /*non_blocking=*/copy.tensor.is_pinned());
          }) {}

ObserveSavedTensorsGuard::ObserveSavedTensorsGuard(std::function<void(const Tensor&)> observe)
    : guard_(
          [observe = std::move(observe)](const Tensor& t) -> std::any {
            observe(t);
            return t;
          },
          [](const std::any& packed) { return std::any_cast<Tensor>(packed); }) {}

}  // namespace memgrad::autograd
