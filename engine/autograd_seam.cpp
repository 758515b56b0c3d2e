// The seam's installed implementation and the thread-local modes.
#include "engine/autograd_seam.h"

namespace memgrad {
namespace {

AutogradSeam* g_seam = nullptr;
thread_local bool t_grad_mode = true;
thread_local bool t_autocast = false;

}  // namespace

AutogradSeam* autograd_seam() { return g_seam; }
void set_autograd_seam(AutogradSeam* seam) { g_seam = seam; }

bool grad_mode_enabled() { return t_grad_mode; }
void set_grad_mode_enabled(bool enabled) { t_grad_mode = enabled; }

bool autocast_enabled() { return t_autocast; }
void set_autocast_enabled(bool enabled) { t_autocast = enabled; }

}  // namespace memgrad
