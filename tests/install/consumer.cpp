// A program outside the project that uses memgrad through its installed headers and pkg-config
// file (tools/check_install.sh builds and runs it): tensors, autograd and the allocator stats
// must all be there, autograd included although nothing names its static registration.
#include <cstdio>

#include "autograd/autograd.h"
#include "engine/memgrad.h"

int main() {
  using namespace memgrad;
  const Tensor x = randn({4, 3}).requires_grad_();
  (x * x).sum().backward();
  const bool grad_ok = x.grad().defined() && allclose(x.grad(), x.detach() * 2.0);
  const size_t allocated = memory_allocated(kCPU);
  std::printf("consumer: gradient %s, %zu bytes allocated on cpu\n", grad_ok ? "ok" : "WRONG",
              allocated);
  return grad_ok && allocated > 0 ? 0 : 1;
}
