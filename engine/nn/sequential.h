// Sequential: a chain of unary modules run in order.
//
// Memory: the container holds no tensor of its own, only its modules (and through them their
// parameters). forward keeps one activation alive at a time; what stays for backward is what
// each module saves.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/module.h"

namespace memgrad::nn {

// Runs its modules in order; they are named "0", "1", ... as in PyTorch.
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> modules);
  // Appends `module`, registered as a child named by its position.
  void push_back(std::shared_ptr<UnaryModule> module);
  // Each module's forward on the previous one's result. Allocates and saves what they do.
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const { return modules_.at(i); }

 private:
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};

}  // namespace memgrad::nn
