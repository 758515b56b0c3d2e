// B17 -- model checkpointing to disk (seed 003 §6).
//
// A model's state dict is saved as safetensors and loaded back: every tensor is compared byte
// for byte, the file is exactly 8 bytes of header length + the JSON header + the tensors' raw
// bytes, and loading allocates exactly the tensors' rounded bytes. Then a training checkpoint
// (model, Adam state, step and generator state: the model uses dropout) is written after k
// steps; training on for k steps and restoring the file into a fresh model and optimizer and
// training k steps give the same losses, bit for bit.
//
//   ./memgrad example b17 [--size N] [--device sim:0]
#include "examples/behaviours/b17_checkpoint_files.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kInputs = 64;
constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 32;
constexpr uint64_t kDataSeed = 2024;

// A fresh directory under the system's temporary directory, removed with everything in it when
// this goes out of scope.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "memgrad-b17-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw ValueError(fmt::format("[b17] cannot create a temporary directory from '{}'", pattern),
                       "b17", "pattern", pattern);
    }
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::shared_ptr<nn::Sequential> make_model(int64_t hidden, Device device) {
  const nn::LinearOptions o{true, device, kFloat32};
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(kInputs, hidden, o), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(hidden, kClasses, o)});
}

// One Adam step on the synthetic batch number `step` (its own generator, so the data does not
// depend on the device's default generator, which dropout uses). Returns the loss.
double train_step(nn::UnaryModule& model, optim::Optimizer& optimizer, int64_t step,
                  Device device) {
  Generator data(kDataSeed + static_cast<uint64_t>(step));
  const Tensor x = randn({kBatch, kInputs}, TensorOptions(kFloat32).with_device(device), &data);
  const Tensor y = randint(0, kClasses, {kBatch}, TensorOptions(kInt64).with_device(device), &data);
  const Tensor loss = nn::cross_entropy(model.forward(x), y);
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ha = a.to(kCPU).contiguous(), hb = b.to(kCPU).contiguous();
  return std::memcmp(ha.data_ptr(), hb.data_ptr(), ha.nbytes()) == 0;
}

int64_t header_length(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char prefix[8] = {};
  in.read(reinterpret_cast<char*>(prefix), sizeof prefix);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | prefix[i];  // little-endian
  }
  return static_cast<int64_t>(n);
}

// The state dict round trip: file layout, bit-exactness and the bytes loading allocates.
void state_dict_round_trip(const nn::Module& model, const fs::path& file, Device device,
                           CheckpointFilesResult& r) {
  const nn::StateDict saved = model.state_dict();
  io::save_state_dict(file.string(), saved);
  r.file_bytes = static_cast<int64_t>(fs::file_size(file));
  r.header_bytes = header_length(file);
  const int64_t before = static_cast<int64_t>(memory_allocated(device));
  const nn::StateDict loaded = io::load_state_dict(file.string(), device);
  r.load_measured = static_cast<int64_t>(memory_allocated(device)) - before;
  for (size_t i = 0; i < saved.size(); ++i) {
    const Tensor& t = saved[i].second;
    r.data_bytes += static_cast<int64_t>(t.nbytes());
    r.load_expected += rounded(static_cast<int64_t>(t.nbytes()));
    const bool exact =
        i < loaded.size() && loaded[i].first == saved[i].first && same_bytes(loaded[i].second, t);
    r.tensors.push_back(
        {saved[i].first, to_string(t.sizes()), static_cast<int64_t>(t.nbytes()), exact});
  }
  const std::shared_ptr<nn::Sequential> other = make_model(model.parameters()[0].size(0), device);
  const int64_t before_copy = static_cast<int64_t>(memory_allocated(device));
  other->load_state_dict(loaded);
  r.copy_in_measured = static_cast<int64_t>(memory_allocated(device)) - before_copy;
}

}  // namespace

CheckpointFilesResult measure_checkpoint_files(int64_t size, Device device, int64_t steps) {
  CheckpointFilesResult r;
  r.steps = steps;
  const int64_t hidden = 128 * size;
  fs::path dir_path;
  {
    const TemporaryDirectory dir;
    dir_path = dir.path();
    manual_seed(7);
    const std::shared_ptr<nn::Sequential> model = make_model(hidden, device);
    state_dict_round_trip(*model, dir.path() / "model.safetensors", device, r);

    optim::Adam optimizer(model->parameters(), {.lr = 1e-2});
    for (int64_t s = 0; s < steps; ++s) {
      train_step(*model, optimizer, s, device);
    }
    const fs::path checkpoint = dir.path() / "checkpoint.safetensors";
    io::TrainingState state;
    state.step = steps;
    state.generator = default_generator(device).get_state();
    io::save_checkpoint(checkpoint.string(), *model, optimizer, state);
    r.checkpoint_file_bytes = static_cast<int64_t>(fs::file_size(checkpoint));
    for (int64_t s = steps; s < 2 * steps; ++s) {
      r.losses_continued.push_back(train_step(*model, optimizer, s, device));
    }

    // A different seed: the fresh model starts from other weights, so only the file can make
    // its losses equal.
    manual_seed(99);
    const std::shared_ptr<nn::Sequential> fresh = make_model(hidden, device);
    optim::Adam fresh_optimizer(fresh->parameters(), {.lr = 1e-2});
    const io::TrainingState resumed =
        io::load_checkpoint(checkpoint.string(), *fresh, fresh_optimizer);
    for (int64_t s = resumed.step; s < resumed.step + steps; ++s) {
      r.losses_resumed.push_back(train_step(*fresh, fresh_optimizer, s, device));
    }
  }
  r.files_removed = !fs::exists(dir_path);
  return r;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B17", "model checkpointing to disk", "seed 003 (section 6)",
    "Saving a model's state to a file and loading it back later lets a long training run stop "
    "and continue without keeping everything in memory."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const CheckpointFilesResult r = measure_checkpoint_files(flags.size, device);
  fmt::print("state dict saved as safetensors and loaded back on {}:\n", device.str());
  int exact = 0;
  for (const RoundTripRow& t : r.tensors) {
    fmt::print("  {:<10} {:<10} {:>9} B  bit-exact: {}\n", t.name, t.shape, with_commas(t.nbytes),
               t.bit_exact ? "yes" : "NO");
    exact += t.bit_exact ? 1 : 0;
  }
  fmt::print("\n");
  MemoryReport report("The file and the memory of loading it:");
  report.add(fmt::format("file size = 8 + header ({} B) + data", r.header_bytes),
             8 + r.header_bytes + r.data_bytes, r.file_bytes);
  report.add("data bytes (sum of numel x 4) = file - 8 - header", r.data_bytes,
             r.file_bytes - 8 - r.header_bytes);
  report.add("load_state_dict(file): each tensor, rounded", r.load_expected, r.load_measured);
  report.add("Module::load_state_dict: copies into the parameters", 0, r.copy_in_measured);
  report.print();

  fmt::print(
      "\ntraining checkpoint after {} Adam steps ({} B: model, Adam state, step, "
      "generator):\n  step  loss, trained on  loss, resumed from the file  identical\n",
      r.steps, with_commas(r.checkpoint_file_bytes));
  bool same = r.losses_continued.size() == r.losses_resumed.size();
  for (size_t i = 0; i < r.losses_continued.size() && i < r.losses_resumed.size(); ++i) {
    const bool eq = r.losses_continued[i] == r.losses_resumed[i];
    same = same && eq;
    fmt::print("  {:>4}  {:<16.9f}  {:<27.9f}  {}\n", r.steps + static_cast<int64_t>(i) + 1,
               r.losses_continued[i], r.losses_resumed[i], eq ? "yes" : "NO");
  }
  fmt::print("temporary files removed: {}\n", r.files_removed ? "yes" : "NO");
  const bool all_exact = exact == static_cast<int>(r.tensors.size());
  print_conclusion(fmt::format(
      "{} of {} tensors came back bit for bit from a file of exactly 8 + {} + {} bytes; the run "
      "resumed from the checkpoint {} the uninterrupted run's losses.",
      exact, r.tensors.size(), r.header_bytes, r.data_bytes,
      same ? "reproduced, bit for bit," : "did NOT reproduce"));
  return report.all_match() && all_exact && same && r.files_removed ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b17_checkpoint_files_main() is its main() (a generated file calls it).
int b17_checkpoint_files_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
