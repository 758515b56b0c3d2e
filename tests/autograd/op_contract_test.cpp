// The op contract test: for every op in autograd's registry, the bytes its node keeps saved after
// forward, measured with the allocator, against the table below.
//
// Each row also names the engine header that documents the op and the words it says there: the
// headers' "Saves for backward" lines are written from this table, and the test fails when a
// header drifts from it. In-place rows check "Allocates" too: the copy of self an in-place op
// makes when backward needs the values it overwrites.
//
// How a row is measured: the op's inputs are fresh tensors (those that require grad are clones
// of leaves made beforehand, so CloneBackward keeps nothing of them); after the op, everything
// but the sum of its first output is dropped. The sum keeps the graph, so the bytes still
// allocated above the start, less the sum itself, are exactly what the op's node saved. Shapes
// are chosen so each tensor's bytes round to whole 512-byte blocks; expectations are computed
// from the shapes.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "allocator/caching_allocator.h"
#include "autograd/autograd.h"
#include "autograd/functions/registry.h"
#include "engine/nn/functional.h"

using namespace memgrad;

namespace {

// How a row's input is made.
enum class Make {
  Grad,   // float32, requires grad (a non-leaf: a clone of a leaf)
  Data,   // float32, no grad
  Index,  // int64 in [0, bound)
  Mask,   // bool
};

struct Input {
  Shape sizes;
  Make make = Make::Grad;
  int64_t bound = 0;  // Index: values in [0, bound)
};

// Bytes of whole blocks, as the caching allocator hands them out.
size_t blocks(size_t nbytes) {
  return (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}
size_t blocks(const Tensor& t) { return blocks(t.nbytes()); }

// The rounded bytes of a row's inputs and outputs, for its expectations.
struct Bytes {
  std::vector<size_t> in;
  std::vector<size_t> out;
};

using Run = std::function<std::vector<Tensor>(std::vector<Tensor>&)>;
using Expect = std::function<size_t(const Bytes&)>;

struct Contract {
  const char* name;    // the case, in failure messages
  OpKind kind;         // the node the first output (or self) must carry
  const char* header;  // the engine header stating the op's contract
  const char* says;    // the words it says there
  std::vector<Input> inputs;
  Run run;
  Expect saved;                // bytes the node keeps after forward
  Expect allocated = nullptr;  // in-place rows: bytes the call itself allocates
};

const Expect kNothing = [](const Bytes&) -> size_t { return 0; };
Expect input(size_t i) {
  return [i](const Bytes& b) { return b.in[i]; };
}
Expect inputs(size_t i, size_t j) {
  return [i, j](const Bytes& b) { return b.in[i] + b.in[j]; };
}
Expect output(size_t i) {
  return [i](const Bytes& b) { return b.out[i]; };
}
Expect input_and_output(size_t i, size_t o) {
  return [i, o](const Bytes& b) { return b.in[i] + b.out[o]; };
}

// One op's run on its inputs, returning its outputs.
template <class F>
Run op(F f) {
  return [f](std::vector<Tensor>& x) -> std::vector<Tensor> { return {f(x)}; };
}

const Shape kM{8, 16};  // 128 float32: one 512-byte block
const Input kX{kM};
const Input kData{kM, Make::Data};

constexpr const char* kElementwise = "engine/elementwise.h";
constexpr const char* kReduce = "engine/reduce.h";
constexpr const char* kLinalg = "engine/linalg.h";
constexpr const char* kIndexing = "engine/indexing.h";
constexpr const char* kViews = "engine/views.h";
constexpr const char* kCopy = "engine/copy.h";
constexpr const char* kFunctional = "engine/nn/functional.h";

constexpr const char* kNoSaves = "add, sub, neg, and add/sub/mul/div with a scalar: nothing";
constexpr const char* kOfResult = "exp, tanh, sigmoid, relu, sqrt, rsqrt, reciprocal: the result";
constexpr const char* kOfSelf = "log, abs, gelu, silu, square, clamp: self";
constexpr const char* kCopiesForSelf =
    "log_, abs_, silu_, clamp_ and pow_ with a scalar exponent copy self when self requires grad";
constexpr const char* kCopiesForOther =
    "mul_ and div_ with a tensor copy self when other requires grad";
constexpr const char* kNoCopy =
    "exp_, tanh_, sigmoid_, relu_, sqrt_, rsqrt_ and reciprocal_ save self's new value: no copy";
constexpr const char* kInplaceNothing =
    "add_, sub_, neg_ and the scalar forms of mul_ and div_ save nothing";
constexpr const char* kMatrix =
    "mm, bmm, matmul: self if other requires grad, other if self "
    "requires grad";
constexpr const char* kFullExtremes =
    "max, min of all elements, amax, amin, logsumexp, norm: self and the result";
constexpr const char* kViewsSave = "Saves for backward: nothing; backward needs only sizes";
constexpr const char* kCopySave =
    "Saves for backward: nothing. to, clone and copy_ pass "
    "gradients through";

// The contract tables keep one row per op, aligned by hand.
// clang-format off
std::vector<Contract> elementwise_contracts() {
  using V = std::vector<Tensor>;
  return {
      {"add", OpKind::Add, kElementwise, kNoSaves, {kX, kX}, op([](V& x) { return x[0] + x[1]; }),
       kNothing},
      {"sub", OpKind::Sub, kElementwise, kNoSaves, {kX, kX}, op([](V& x) { return x[0] - x[1]; }),
       kNothing},
      {"mul, both require grad", OpKind::Mul, kElementwise,
       "mul: self if other requires grad, other if self requires grad", {kX, kX},
       op([](V& x) { return x[0] * x[1]; }), inputs(0, 1)},
      {"mul, only self requires grad", OpKind::Mul, kElementwise,
       "mul: self if other requires grad, other if self requires grad", {kX, kData},
       op([](V& x) { return x[0] * x[1]; }), input(1)},
      {"div, both require grad", OpKind::Div, kElementwise,
       "div: other; self if other requires grad", {kX, kX}, op([](V& x) { return x[0] / x[1]; }),
       inputs(0, 1)},
      {"div, only self requires grad", OpKind::Div, kElementwise,
       "div: other; self if other requires grad", {kX, kData},
       op([](V& x) { return x[0] / x[1]; }), input(1)},
      {"add a scalar", OpKind::AddScalar, kElementwise, kNoSaves, {kX},
       op([](V& x) { return x[0] + 2.0; }), kNothing},
      {"mul by a scalar", OpKind::MulScalar, kElementwise, kNoSaves, {kX},
       op([](V& x) { return x[0] * 2.0; }), kNothing},
      {"div by a scalar", OpKind::DivScalar, kElementwise, kNoSaves, {kX},
       op([](V& x) { return x[0] / 2.0; }), kNothing},
      {"rsub", OpKind::RSubScalar, kElementwise, kNoSaves, {kX},
       op([](V& x) { return 2.0 - x[0]; }), kNothing},
      {"neg", OpKind::Neg, kElementwise, kNoSaves, {kX}, op([](V& x) { return -x[0]; }), kNothing},
      {"rdiv", OpKind::DivScalar, kElementwise, "rdiv (s / x): x", {kX},
       op([](V& x) { return 2.0 / x[0]; }), input(0)},
      {"pow", OpKind::Pow, kElementwise, "pow: self and exponent", {kX, kX},
       op([](V& x) { return pow(x[0], x[1]); }), inputs(0, 1)},
      {"pow with a scalar exponent", OpKind::PowScalar, kElementwise,
       "pow with a scalar exponent: self", {kX}, op([](V& x) { return x[0].pow(3.0); }), input(0)},
      {"exp", OpKind::Exp, kElementwise, kOfResult, {kX}, op([](V& x) { return exp(x[0]); }),
       output(0)},
      {"tanh", OpKind::Tanh, kElementwise, kOfResult, {kX}, op([](V& x) { return tanh(x[0]); }),
       output(0)},
      {"sigmoid", OpKind::Sigmoid, kElementwise, kOfResult, {kX},
       op([](V& x) { return sigmoid(x[0]); }), output(0)},
      {"relu", OpKind::Relu, kElementwise, kOfResult, {kX}, op([](V& x) { return relu(x[0]); }),
       output(0)},
      {"sqrt", OpKind::Sqrt, kElementwise, kOfResult, {kX}, op([](V& x) { return sqrt(x[0]); }),
       output(0)},
      {"rsqrt", OpKind::Rsqrt, kElementwise, kOfResult, {kX},
       op([](V& x) { return rsqrt(x[0]); }), output(0)},
      {"reciprocal", OpKind::Reciprocal, kElementwise, kOfResult, {kX},
       op([](V& x) { return reciprocal(x[0]); }), output(0)},
      {"log", OpKind::Log, kElementwise, kOfSelf, {kX}, op([](V& x) { return log(x[0]); }),
       input(0)},
      {"abs", OpKind::Abs, kElementwise, kOfSelf, {kX}, op([](V& x) { return abs(x[0]); }),
       input(0)},
      {"gelu", OpKind::Gelu, kElementwise, kOfSelf, {kX}, op([](V& x) { return gelu(x[0]); }),
       input(0)},
      {"gelu, tanh approximation", OpKind::Gelu, kElementwise, kOfSelf, {kX},
       op([](V& x) { return gelu(x[0], true); }), input(0)},
      {"silu", OpKind::Silu, kElementwise, kOfSelf, {kX}, op([](V& x) { return silu(x[0]); }),
       input(0)},
      {"square", OpKind::Square, kElementwise, kOfSelf, {kX},
       op([](V& x) { return square(x[0]); }), input(0)},
      {"clamp", OpKind::Clamp, kElementwise, kOfSelf, {kX},
       op([](V& x) { return x[0].clamp(0.6, 1.2); }), input(0)},
      {"sign", OpKind::Sign, kElementwise, "sign: nothing (its gradient is zero)", {kX},
       op([](V& x) { return sign(x[0]); }), kNothing},
      {"maximum", OpKind::Maximum, kElementwise, "maximum, minimum: both inputs", {kX, kX},
       op([](V& x) { return maximum(x[0], x[1]); }), inputs(0, 1)},
      {"minimum", OpKind::Minimum, kElementwise, "maximum, minimum: both inputs", {kX, kX},
       op([](V& x) { return minimum(x[0], x[1]); }), inputs(0, 1)},
      {"where", OpKind::Where, kElementwise, "where: the condition", {{kM, Make::Mask}, kX, kX},
       op([](V& x) { return where(x[0], x[1], x[2]); }), input(0)},
  };
}

// In place: `self` is input 0, a non-leaf that requires grad (in-place on a leaf is refused).
std::vector<Contract> inplace_contracts() {
  using V = std::vector<Tensor>;
  const Expect copy_of_self = input(0);
  return {
      {"log_", OpKind::Log, kElementwise, kCopiesForSelf, {kX},
       op([](V& x) { return x[0].log_(); }), input(0), copy_of_self},
      {"abs_", OpKind::Abs, kElementwise, kCopiesForSelf, {kX},
       op([](V& x) { return x[0].abs_(); }), input(0), copy_of_self},
      {"silu_", OpKind::Silu, kElementwise, kCopiesForSelf, {kX},
       op([](V& x) { return x[0].silu_(); }), input(0), copy_of_self},
      {"clamp_", OpKind::Clamp, kElementwise, kCopiesForSelf, {kX},
       op([](V& x) { return x[0].clamp_(0.6, 1.2); }), input(0), copy_of_self},
      {"pow_ with a scalar exponent", OpKind::PowScalar, kElementwise, kCopiesForSelf, {kX},
       op([](V& x) { return x[0].pow_(3.0); }), input(0), copy_of_self},
      {"mul_, other requires grad", OpKind::Mul, kElementwise, kCopiesForOther, {kX, kX},
       op([](V& x) { return x[0].mul_(x[1]); }), inputs(0, 1), copy_of_self},
      {"mul_, other does not", OpKind::Mul, kElementwise, kCopiesForOther, {kX, kData},
       op([](V& x) { return x[0].mul_(x[1]); }), input(1), kNothing},
      {"div_, other requires grad", OpKind::Div, kElementwise, kCopiesForOther, {kX, kX},
       op([](V& x) { return x[0].div_(x[1]); }), inputs(0, 1), copy_of_self},
      {"exp_", OpKind::Exp, kElementwise, kNoCopy, {kX}, op([](V& x) { return x[0].exp_(); }),
       input(0), kNothing},
      {"tanh_", OpKind::Tanh, kElementwise, kNoCopy, {kX}, op([](V& x) { return x[0].tanh_(); }),
       input(0), kNothing},
      {"sigmoid_", OpKind::Sigmoid, kElementwise, kNoCopy, {kX},
       op([](V& x) { return x[0].sigmoid_(); }), input(0), kNothing},
      {"relu_", OpKind::Relu, kElementwise, kNoCopy, {kX}, op([](V& x) { return x[0].relu_(); }),
       input(0), kNothing},
      {"sqrt_", OpKind::Sqrt, kElementwise, kNoCopy, {kX}, op([](V& x) { return x[0].sqrt_(); }),
       input(0), kNothing},
      {"rsqrt_", OpKind::Rsqrt, kElementwise, kNoCopy, {kX},
       op([](V& x) { return x[0].rsqrt_(); }), input(0), kNothing},
      {"reciprocal_", OpKind::Reciprocal, kElementwise, kNoCopy, {kX},
       op([](V& x) { return x[0].reciprocal_(); }), input(0), kNothing},
      {"add_", OpKind::Add, kElementwise, kInplaceNothing, {kX, kX},
       op([](V& x) { return x[0].add_(x[1]); }), kNothing, kNothing},
      {"sub_", OpKind::Sub, kElementwise, kInplaceNothing, {kX, kX},
       op([](V& x) { return x[0].sub_(x[1]); }), kNothing, kNothing},
      {"neg_", OpKind::Neg, kElementwise, kInplaceNothing, {kX},
       op([](V& x) { return x[0].neg_(); }), kNothing, kNothing},
      {"mul_ by a scalar", OpKind::MulScalar, kElementwise, kInplaceNothing, {kX},
       op([](V& x) { return x[0].mul_(2.0); }), kNothing, kNothing},
      {"div_ by a scalar", OpKind::DivScalar, kElementwise, kInplaceNothing, {kX},
       op([](V& x) { return x[0].div_(2.0); }), kNothing, kNothing},
      {"masked_fill_", OpKind::MaskedFill, kIndexing, "masked_fill: the mask",
       {kX, {kM, Make::Mask}}, op([](V& x) { return x[0].masked_fill_(x[1], 0.0); }), input(1),
       kNothing},
      {"scatter_add_", OpKind::ScatterAdd, kIndexing,
       "index_select, gather, scatter_add: the index", {kX, {{8, 4}, Make::Index, 16}, {{8, 4}}},
       op([](V& x) { return x[0].scatter_add_(1, x[1], x[2]); }), input(1), kNothing},
      {"copy_", OpKind::Copy, kCopy, kCopySave, {kData, kX},
       op([](V& x) { return x[0].copy_(x[1]); }), kNothing, kNothing},
      {"fill_", OpKind::Fill, kCopy, kCopySave, {kX}, op([](V& x) { return x[0].fill_(1.0); }),
       kNothing, kNothing},
  };
}

std::vector<Contract> reduce_contracts() {
  using V = std::vector<Tensor>;
  return {
      {"sum", OpKind::Sum, kReduce, "sum, mean: nothing", {kX},
       op([](V& x) { return x[0].sum({0}); }), kNothing},
      {"mean", OpKind::Mean, kReduce, "sum, mean: nothing", {kX},
       op([](V& x) { return x[0].mean({0}); }), kNothing},
      {"var", OpKind::Var, kReduce, "var: self", {kX}, op([](V& x) { return x[0].var({1}); }),
       input(0)},
      {"std", OpKind::Std, kReduce, "std: self and the result", {kX},
       op([](V& x) { return x[0].std({1}); }), input_and_output(0, 0)},
      {"max along a dim", OpKind::MaxDim, kReduce, "max, min along a dim: the indices", {kX},
       [](V& x) -> V {
         auto [values, indices] = x[0].max(1);
         return {values, indices};
       },
       output(1)},
      {"min along a dim", OpKind::MinDim, kReduce, "max, min along a dim: the indices", {kX},
       [](V& x) -> V {
         auto [values, indices] = x[0].min(1);
         return {values, indices};
       },
       output(1)},
      {"max", OpKind::MaxAll, kReduce, kFullExtremes, {kX}, op([](V& x) { return x[0].max(); }),
       input_and_output(0, 0)},
      {"min", OpKind::MinAll, kReduce, kFullExtremes, {kX}, op([](V& x) { return x[0].min(); }),
       input_and_output(0, 0)},
      {"amax", OpKind::Amax, kReduce, kFullExtremes, {kX},
       op([](V& x) { return x[0].amax({1}); }), input_and_output(0, 0)},
      {"amin", OpKind::Amin, kReduce, kFullExtremes, {kX},
       op([](V& x) { return x[0].amin({1}); }), input_and_output(0, 0)},
      {"logsumexp", OpKind::LogSumExp, kReduce, kFullExtremes, {kX},
       op([](V& x) { return x[0].logsumexp({1}); }), input_and_output(0, 0)},
      {"norm", OpKind::Norm, kReduce, kFullExtremes, {kX}, op([](V& x) { return x[0].norm(); }),
       input_and_output(0, 0)},
      {"softmax", OpKind::Softmax, kReduce, "softmax, log_softmax: the result", {kX},
       op([](V& x) { return x[0].softmax(1); }), output(0)},
      {"log_softmax", OpKind::LogSoftmax, kReduce, "softmax, log_softmax: the result", {kX},
       op([](V& x) { return x[0].log_softmax(1); }), output(0)},
  };
}

std::vector<Contract> linalg_and_nn_contracts() {
  using V = std::vector<Tensor>;
  const Input wide{{16, 8}};  // 128 float32
  return {
      {"mm, both require grad", OpKind::Mm, kLinalg, kMatrix, {kX, wide},
       op([](V& x) { return mm(x[0], x[1]); }), inputs(0, 1)},
      {"mm, only self requires grad", OpKind::Mm, kLinalg, kMatrix, {kX, {{16, 8}, Make::Data}},
       op([](V& x) { return mm(x[0], x[1]); }), input(1)},
      {"bmm", OpKind::Bmm, kLinalg, kMatrix, {{{2, 4, 16}}, {{2, 16, 4}}},
       op([](V& x) { return bmm(x[0], x[1]); }), inputs(0, 1)},
      {"matmul", OpKind::Matmul, kLinalg, kMatrix, {kX, wide},
       op([](V& x) { return matmul(x[0], x[1]); }), inputs(0, 1)},
      {"addmm", OpKind::Addmm, kLinalg,
       "addmm: a if b requires grad, b if a requires grad (never the bias)",
       {{{8, 8}}, kX, wide}, op([](V& x) { return addmm(x[0], x[1], x[2]); }), inputs(1, 2)},
      {"linear", OpKind::Linear, kLinalg,
       "linear: the input if the weight requires grad, the weight if the input requires grad",
       {kX, kX, {{8}}}, op([](V& x) { return linear(x[0], x[1], x[2]); }), inputs(0, 1)},
      {"linear on data", OpKind::Linear, kLinalg,
       "linear: the input if the weight requires grad, the weight if the input requires grad",
       {kData, kX, {{8}}}, op([](V& x) { return linear(x[0], x[1], x[2]); }), input(0)},
      {"layer_norm", OpKind::LayerNorm, kFunctional,
       "Saves: layer_norm: x, mean, rstd and the weight", {kX, {{16}}, {{16}}},
       op([](V& x) { return nn::layer_norm(x[0], {16}, x[1], x[2]); }),
       [](const Bytes& b) { return b.in[0] + 2 * blocks(8 * sizeof(float)) + b.in[1]; }},
      {"cross_entropy", OpKind::CrossEntropy, kFunctional,
       "Saves: cross_entropy: the log-probabilities and the target",
       {kX, {{8}, Make::Index, 16}},
       op([](V& x) { return nn::cross_entropy(x[0], x[1]); }),
       [](const Bytes& b) { return b.in[0] + b.in[1]; }},
      {"dropout", OpKind::Dropout, kFunctional, "Saves: dropout: the mask", {kX},
       op([](V& x) { return nn::dropout(x[0], 0.5, true); }),
       [](const Bytes&) { return blocks(8 * 16 * sizeof(bool)); }},
  };
}

std::vector<Contract> indexing_contracts() {
  using V = std::vector<Tensor>;
  const char* kIndex = "index_select, gather, scatter_add: the index";
  return {
      {"index_select", OpKind::IndexSelect, kIndexing, kIndex, {kX, {{4}, Make::Index, 8}},
       op([](V& x) { return x[0].index_select(0, x[1]); }), input(1)},
      {"gather", OpKind::Gather, kIndexing, kIndex, {kX, {{8, 4}, Make::Index, 16}},
       op([](V& x) { return x[0].gather(1, x[1]); }), input(1)},
      {"scatter_add", OpKind::ScatterAdd, kIndexing, kIndex,
       {kX, {{8, 4}, Make::Index, 16}, {{8, 4}}},
       op([](V& x) { return x[0].scatter_add(1, x[1], x[2]); }), input(1)},
      {"embedding", OpKind::Embedding, kIndexing, "embedding: the indices",
       {{{16, 8}}, {{4}, Make::Index, 16}}, op([](V& x) { return embedding(x[0], x[1]); }),
       input(1)},
      {"masked_fill", OpKind::MaskedFill, kIndexing, "masked_fill: the mask",
       {kX, {kM, Make::Mask}}, op([](V& x) { return x[0].masked_fill(x[1], 0.0); }), input(1)},
      {"cat", OpKind::Cat, kIndexing, "cat, stack, pad: nothing", {kX, kX},
       op([](V& x) { return cat({x[0], x[1]}, 0); }), kNothing},
      {"pad", OpKind::Pad, kIndexing, "cat, stack, pad: nothing", {kX},
       op([](V& x) { return pad(x[0], {1, 1}); }), kNothing},
  };
}

std::vector<Contract> view_and_copy_contracts() {
  using V = std::vector<Tensor>;
  return {
      {"view", OpKind::View, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].view({16, 8}); }), kNothing},
      {"expand", OpKind::Expand, kViews, kViewsSave, {{{8, 1}}},
       op([](V& x) { return x[0].expand({8, 16}); }), kNothing},
      {"slice", OpKind::Slice, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].slice(1, 0, 16, 2); }), kNothing},
      {"select", OpKind::Select, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].select(0, 1); }), kNothing},
      {"transpose", OpKind::Transpose, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].transpose(0, 1); }), kNothing},
      {"permute", OpKind::Permute, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].permute({1, 0}); }), kNothing},
      {"squeeze", OpKind::Squeeze, kViews, kViewsSave, {{{1, 8, 16}}},
       op([](V& x) { return x[0].squeeze(0); }), kNothing},
      {"unsqueeze", OpKind::Unsqueeze, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].unsqueeze(0); }), kNothing},
      {"as_strided", OpKind::AsStrided, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].as_strided({4, 4}, {16, 1}); }), kNothing},
      {"diagonal", OpKind::Diagonal, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].diagonal(); }), kNothing},
      {"split", OpKind::Split, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].split(4, 1)[1]; }), kNothing},
      {"unbind", OpKind::Unbind, kViews, kViewsSave, {kX},
       op([](V& x) { return x[0].unbind(0)[2]; }), kNothing},
      {"clone", OpKind::Clone, kCopy, kCopySave, {kX}, op([](V& x) { return x[0].clone(); }),
       kNothing},
      {"to a dtype", OpKind::ToDtype, kCopy, kCopySave, {kX},
       op([](V& x) { return x[0].to(kFloat64); }), kNothing},
      {"to a device", OpKind::ToDevice, kCopy, kCopySave, {kX},
       op([](V& x) { return x[0].to(Device("sim:0")); }), kNothing},
  };
}
// clang-format on

std::vector<Contract> all_contracts() {
  std::vector<Contract> all;
  for (auto table : {elementwise_contracts, inplace_contracts, reduce_contracts,
                     linalg_and_nn_contracts, indexing_contracts, view_and_copy_contracts}) {
    for (Contract& c : table()) all.push_back(std::move(c));
  }
  return all;
}

// The input tensors of a row. Leaves stay alive across the measurement; the op gets fresh
// tensors made from them.
struct Leaves {
  std::vector<Tensor> tensors;

  explicit Leaves(const std::vector<Input>& inputs) {
    Generator generator(7);
    for (const Input& in : inputs) {
      Tensor t;
      switch (in.make) {
        case Make::Grad:
        case Make::Data:
          t = rand(in.sizes, {}, &generator) + 0.5;  // in [0.5, 1.5): log, sqrt, pow are finite
          if (in.make == Make::Grad) t.requires_grad_();
          break;
        case Make::Index:
          t = randint(0, in.bound, in.sizes, TensorOptions(kInt64), &generator);
          break;
        case Make::Mask: t = rand(in.sizes, {}, &generator).gt(0.5); break;
      }
      tensors.push_back(t);
    }
  }

  // Fresh tensors for the op: clones, so that a leaf requiring grad becomes a non-leaf whose
  // bytes only the op's saving can keep alive.
  std::vector<Tensor> fresh() const {
    std::vector<Tensor> out;
    for (const Tensor& t : tensors) out.push_back(t.clone());
    return out;
  }

  // The bytes of the leaves' gradients after backward.
  size_t grad_bytes() const {
    size_t total = 0;
    for (const Tensor& t : tensors) {
      if (t.requires_grad() && t.grad().defined()) total += blocks(t.grad());
    }
    return total;
  }
};

// The engine header's comment lines, without the comment markers, as one line of single spaces.
std::string header_words(const std::string& path) {
  std::ifstream file(std::string(MEMGRAD_SOURCE_ROOT) + "/" + path);
  REQUIRE_MESSAGE(file.good(), "cannot read ", path);
  std::string line, words;
  while (std::getline(file, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, 2, "//") != 0) continue;
    std::istringstream tokens(line.substr(start + 2));
    std::string token;
    while (tokens >> token) words += token + " ";
  }
  return words;
}

size_t cpu_allocated() { return memory_allocated(kCPU); }

void check_contract(const Contract& c) {
  const std::string name = c.name;
  CAPTURE(name);
  const Leaves leaves(c.inputs);
  const size_t start = cpu_allocated();
  Tensor root;
  size_t expected_saved = 0;
  {
    std::vector<Tensor> x = leaves.fresh();
    Bytes bytes;
    for (const Tensor& t : x) bytes.in.push_back(blocks(t));
    const size_t before_op = cpu_allocated();
    const std::vector<Tensor> outputs = c.run(x);
    if (c.allocated) {
      CHECK_MESSAGE(cpu_allocated() - before_op == c.allocated(bytes),
                    "the in-place call allocated ", cpu_allocated() - before_op);
    }
    REQUIRE(outputs[0].requires_grad());
    CHECK_EQ(outputs[0].grad_fn_name(), autograd::backward_name(c.kind));
    for (const Tensor& t : outputs) bytes.out.push_back(blocks(t));
    expected_saved = c.saved(bytes);
    root = outputs[0].sum();  // keeps the graph, hence the op's node, alive
  }
  const size_t root_bytes = root.device() == kCPU ? blocks(root) : 0;
  CHECK_EQ(cpu_allocated() - start - root_bytes, expected_saved);
  // The formula runs on exactly what was saved, and backward frees it: only the leaves'
  // gradients remain.
  root.backward();
  CHECK_EQ(cpu_allocated() - start - root_bytes, leaves.grad_bytes());
}

}  // namespace

TEST_SUITE("autograd") {

TEST_CASE("every registered op keeps saved exactly the bytes its contract states") {
  for (const Contract& c : all_contracts()) check_contract(c);
}

TEST_CASE("every op in autograd's registry has a row in the contract table") {
  std::set<OpKind> covered;
  for (const Contract& c : all_contracts()) covered.insert(c.kind);
  for (size_t k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    if (autograd::op_entry(kind).backward == nullptr) continue;
    const std::string op = op_name(kind);
    CAPTURE(op);
    CHECK(covered.count(kind) == 1);
  }
}

TEST_CASE("each contract row is what its engine header says") {
  std::map<std::string, std::string> headers;
  for (const Contract& c : all_contracts()) {
    const std::string name = c.name, header = c.header;
    CAPTURE(name);
    CAPTURE(header);
    if (!headers.count(c.header)) headers[c.header] = header_words(c.header);
    std::istringstream tokens(c.says);
    std::string words, token;
    while (tokens >> token) words += (words.empty() ? "" : " ") + token;
    CHECK_MESSAGE(headers[c.header].find(words) != std::string::npos,
                  "the header does not say: ", std::string(c.says));
  }
}

TEST_CASE("equal and allclose keep nothing and peak at the temporaries their contract lists") {
  const Tensor a = rand(kM);  // 128 float32
  const Tensor b = a + 1e-9;
  reset_peak_memory_stats(kCPU);
  const size_t start = cpu_allocated();
  CHECK(equal(a, a));
  // a bool tensor of numel bytes and a 0-d result
  CHECK_EQ(max_memory_allocated(kCPU) - start, blocks(128) + blocks(1));
  CHECK_EQ(cpu_allocated(), start);
  reset_peak_memory_stats(kCPU);
  CHECK(allclose(a, b));
  // two float64 tensors of numel elements, a bool tensor of numel bytes and a 0-d result
  CHECK_EQ(max_memory_allocated(kCPU) - start, 2 * blocks(128 * 8) + blocks(128) + blocks(1));
  CHECK_EQ(cpu_allocated(), start);
}

}  // TEST_SUITE("autograd")
