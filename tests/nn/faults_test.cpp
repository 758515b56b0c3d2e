// Faults that must lose nothing: grad mode after an exception inside an op, loads that fail
// half-way, files written while others read them or while the disk refuses them, and
// safetensors files the format's own loader would reject. Each case reproduces a failure once
// seen, or a neighbour of one.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "allocator/config.h"
#include "allocator/error.h"
#include "autograd/autograd.h"
#include "base/atomic_file.h"
#include "engine/io/checkpoint.h"
#include "engine/io/safetensors.h"
#include "engine/memory.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "tests/support/error_check.h"
#include "tests/support/temp_dir.h"

using namespace memgrad;
using memgrad::testing::check_checkpoint_error;
using memgrad::testing::TempDir;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Runs `op` on `device` with capacities of 512, 1024, ... bytes (passthrough policy: every
// allocation goes to the device, so each step moves the OOM one allocation further into the
// op) until it succeeds. After every attempt grad mode must be on again. Returns the number of
// attempts that ran out of memory.
int sweep_ooms(int sim_index, const std::function<void(Device)>& op) {
  const Device device(DeviceType::Sim, sim_index);
  AllocatorConfig config;
  config.policy = "passthrough";
  set_allocator_config(device, config);
  int ooms = 0;
  for (size_t capacity = 512;; capacity += 512) {
    set_sim_capacity(sim_index, capacity);
    try {
      op(device);
      CHECK(is_grad_enabled());
      return ooms;
    } catch (const OutOfMemoryError&) {
      ++ooms;
      CAPTURE(capacity);
      REQUIRE(is_grad_enabled());
    }
    REQUIRE(capacity < (size_t{1} << 24));
  }
}

// The bytes of every tensor of a state dict, to compare before and after a failed load.
std::string snapshot(const nn::StateDict& state) {
  std::string out;
  for (const auto& [name, t] : state) {
    const Tensor c = t.contiguous();
    out += name;
    out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return out;
}

// A two-layer model whose state names are "0.weight", ... (Sequential).
std::shared_ptr<nn::Sequential> two_layers() {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<nn::Linear>(4, 8));
  s->push_back(std::make_shared<nn::Linear>(8, 3));
  return s;
}

void adam_steps(nn::Sequential& model, optim::Optimizer& opt, int steps) {
  Generator g(3);
  const Tensor x = randn({16, 4}, {}, &g);
  const Tensor y = randint(0, 3, {16}, kInt64, &g);
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    nn::cross_entropy(model.forward(x), y).backward();
    opt.step();
  }
}

// The checkpoint at `path` with `edit` applied to its decoded contents.
void rewrite(const std::string& path, const std::function<void(io::SafetensorsFile&)>& edit) {
  io::SafetensorsFile f = io::decode_safetensors(read_file(path));
  edit(f);
  io::save_safetensors(path, f);
}

// Raw file bytes: the 8-byte length, the header, the data.
std::string craft(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return out + header + data;
}

}  // namespace

TEST_SUITE("nn") {

// ---- grad mode ----

TEST_CASE("an OOM inside dropout, cross_entropy or an optimizer step leaves grad mode on") {
  // The catch-OOM-and-retry pattern: after the OOM, a smaller batch must still record a graph.
  const Tensor x_host = randn({32, 16});
  const Tensor target_host = randint(0, 16, {32}, kInt64);
  CHECK(sweep_ooms(20, [&](Device d) {
          Tensor x = x_host.to(d);
          x.requires_grad_(true);
          nn::dropout(x, 0.5, /*training=*/true).sum().backward();
        }) > 0);
  CHECK(sweep_ooms(21, [&](Device d) {
          Tensor logits = x_host.to(d);
          logits.requires_grad_(true);
          nn::cross_entropy(logits, target_host.to(d)).backward();
        }) > 0);
  CHECK(sweep_ooms(22, [&](Device d) {
          nn::Linear layer(16, 16, {.device = d});
          optim::SGD sgd(layer.parameters(), {.lr = 0.1, .momentum = 0.9});
          layer.forward(x_host.to(d)).sum().backward();
          sgd.step();
          layer.zero_grad(/*set_to_none=*/false);
        }) > 0);
  // The retry with grad mode on records as it should.
  Tensor x = x_host.clone();
  x.requires_grad_(true);
  const Tensor y = nn::dropout(x, 0.5, true);
  CHECK(y.requires_grad());
}

TEST_CASE("a failed load_state_dict leaves grad mode on and the module unchanged") {
  auto model = two_layers();
  const std::string before = snapshot(model->state_dict());
  nn::StateDict state = model->state_dict();
  for (auto& [name, t] : state) t = t.detach().clone().add(1.0);
  state.back().second = zeros({7});  // the last entry has the wrong shape
  CHECK_THROWS_WITH_AS(model->load_state_dict(state), doctest::Contains("size mismatch for 1.bias"),
                       CheckpointError);
  CHECK(is_grad_enabled());
  CHECK(snapshot(model->state_dict()) == before);  // the first entries were not copied either
}

// ---- checkpoints ----

TEST_CASE("a checkpoint that fails to load changes neither the model nor the optimizer") {
  TempDir dir("memgrad_faults_test");
  const std::string path = dir.file("ckpt.safetensors");
  manual_seed(5);
  auto saved_model = two_layers();
  optim::Adam saved_opt(saved_model->parameters(), {.lr = 0.02});
  adam_steps(*saved_model, saved_opt, 2);
  io::TrainingState saved_state;
  saved_state.step = 2;
  saved_state.epoch = 1;
  io::save_checkpoint(path, *saved_model, saved_opt, saved_state);

  struct Case {
    const char* what;
    std::function<void(io::SafetensorsFile&)> edit;
    const char* message;
  };
  const std::vector<Case> cases{
      {"a later layer of another shape",
       [](io::SafetensorsFile& f) {
         for (auto& [n, t] : f.tensors) {
           if (n == "model.1.weight") t = zeros({3, 9});
         }
       },
       "size mismatch for 1.weight"},
      {"optimizer state of another shape",
       [](io::SafetensorsFile& f) {
         for (auto& [n, t] : f.tensors) {
           if (n == "optim.state.3.exp_avg_sq") t = zeros({5});
         }
       },
       "state.3.exp_avg_sq has shape [5]"},
      {"a negative learning rate",
       [](io::SafetensorsFile& f) {
         f.metadata["optimizer_scalars"] = R"({"lr": -1, "state.0.step": 2, "state.1.step": 2,
                                               "state.2.step": 2, "state.3.step": 2})";
       },
       "saved learning rate -1 is not a finite number >= 0"},
      {"a step count of 1e300",
       [](io::SafetensorsFile& f) {
         f.metadata["optimizer_scalars"] = R"({"lr": 0.02, "state.0.step": 1e300,
                                               "state.1.step": 2, "state.2.step": 2,
                                               "state.3.step": 2})";
       },
       "and step 1e+300"},
      {"a step count of -1",
       [](io::SafetensorsFile& f) {
         f.metadata["optimizer_scalars"] = R"({"lr": 0.02, "state.0.step": -1,
                                               "state.1.step": 2, "state.2.step": 2,
                                               "state.3.step": 2})";
       },
       "and step -1"},
      {"step with trailing letters", [](io::SafetensorsFile& f) { f.metadata["step"] = "12abc"; },
       "metadata step is \"12abc\", expected an integer >= 0"},
      {"a negative generator seed",
       [](io::SafetensorsFile& f) { f.metadata["generator_seed"] = "-1"; },
       "metadata generator_seed is \"-1\""},
      {"another optimizer's state", [](io::SafetensorsFile& f) { f.metadata["optimizer"] = "SGD"; },
       "holds the state of SGD, not of the Adam"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string bad = dir.file("bad.safetensors");
    std::filesystem::copy_file(path, bad, std::filesystem::copy_options::overwrite_existing);
    rewrite(bad, c.edit);
    manual_seed(6);
    auto model = two_layers();
    optim::Adam opt(model->parameters(), {.lr = 0.5});
    adam_steps(*model, opt, 1);
    const std::string model_before = snapshot(model->state_dict());
    const optim::OptimizerState opt_before = opt.state_dict();
    const GeneratorState gen_before = default_generator(kCPU).get_state();
    CHECK_THROWS_WITH_AS(io::load_checkpoint(bad, *model, opt), doctest::Contains(c.message),
                         CheckpointError);
    CHECK(snapshot(model->state_dict()) == model_before);
    CHECK(snapshot(opt.state_dict().tensors) == snapshot(opt_before.tensors));
    CHECK(opt.state_dict().scalars == opt_before.scalars);
    CHECK(default_generator(kCPU).get_state() == gen_before);
  }
}

TEST_CASE("resuming with another optimizer than the one saved is an error") {
  TempDir dir("memgrad_faults_test");
  const std::string path = dir.file("ckpt.safetensors");
  auto model = two_layers();
  optim::Adam adam(model->parameters(), {});
  adam_steps(*model, adam, 1);
  io::save_checkpoint(path, *model, adam, {});
  optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  check_checkpoint_error([&] { io::load_checkpoint(path, *model, sgd); }, "checkpoint", path,
                         "optimizer");
  // Without the optimizer's name (an older file), the state's names give it away.
  rewrite(path, [](io::SafetensorsFile& f) { f.metadata.erase("optimizer"); });
  CHECK_THROWS_WITH_AS(io::load_checkpoint(path, *model, sgd),
                       doctest::Contains("which is not state of SGD"), CheckpointError);
}

// ---- safetensors ----

TEST_CASE("safetensors files the format's loader rejects are rejected here too") {
  const std::string f32x2 = std::string(8, '\0');
  struct Case {
    const char* what;
    std::string file;
    const char* message;
  };
  const std::vector<Case> cases{
      {"a duplicate tensor key",
       craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             f32x2),
       "duplicate key 'a'"},
      {"a duplicate field",
       craft(R"({"a":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", f32x2),
       "duplicate key 'dtype'"},
      {"a hole between tensors",
       craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             std::string(12, '\0')),
       "bytes 4 to 8 of the data belong to no tensor"},
      {"overlapping tensors",
       craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             f32x2),
       "overlap in the data at byte 4"},
      {"padding after the last tensor",
       craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32x2),
       "the tensors end at byte 4 of the data but it holds 8"},
      {"a BOOL byte of 2",
       craft(R"({"a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
             std::string("\1\2\0", 3)),
       "holds the byte 2 at element 1"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    CHECK_THROWS_WITH_AS(io::decode_safetensors(c.file), doctest::Contains(c.message),
                         CheckpointError);
  }
}

TEST_CASE("randomly corrupted safetensors files load or fail with a CheckpointError") {
  // A mutation fuzzer in bounded time (the sanitizer build runs it too): bytes of the length,
  // the header and the data replaced, spans deleted or repeated, the file cut.
  io::SafetensorsFile f;
  f.tensors.emplace_back("w", arange(12, kFloat32).view({3, 4}));
  f.tensors.emplace_back("mask", arange(5, kInt64).lt(3));
  f.tensors.emplace_back("idx", arange(4, kInt64));
  f.tensors.emplace_back("half", ones({2, 2}, TensorOptions(kFloat16)));
  f.metadata["note"] = "fuzz";
  const std::string valid = io::encode_safetensors(f);
  std::mt19937_64 rng(11);
  int refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string bad = valid;
    const size_t pos = rng() % bad.size();
    switch (rng() % 4) {
      case 0: bad[pos] = static_cast<char>(rng()); break;
      case 1: bad.erase(pos, 1 + rng() % 8); break;
      case 2: bad.insert(pos, bad.substr(pos, 1 + rng() % 16)); break;
      default: bad.resize(pos);
    }
    CAPTURE(i);
    try {
      (void)io::decode_safetensors(bad, "fuzzed");
    } catch (const CheckpointError&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("a corrupted file threw a non-checkpoint error: " << e.what());
    }
  }
  CHECK(refused > 3000);
}

TEST_CASE("saving duplicate, reserved or non-UTF-8 tensor names is a CheckpointError") {
  check_checkpoint_error(
      [] {
        io::encode_safetensors({{{"w", ones({1})}, {"w", ones({2})}}, {}});
      },
      "safetensors", "", "w");
  check_checkpoint_error(
      [] {
        io::encode_safetensors({{{"__metadata__", ones({1})}}, {}});
      },
      "safetensors", "", "__metadata__");
  CHECK_THROWS_WITH_AS(io::encode_safetensors({{{"bad\xff", ones({1})}}, {}}),
                       doctest::Contains("valid UTF-8"), CheckpointError);
  CHECK_THROWS_AS(io::encode_safetensors({{{"w", ones({1})}}, {{"k", "\xc3"}}}), CheckpointError);
}

TEST_CASE("a 200k-entry safetensors header is parsed (in linear time) with its order kept") {
  io::SafetensorsFile f;
  const Tensor empty_tensor = empty({0});
  for (int i = 0; i < 20000; ++i)
    f.tensors.emplace_back(fmt::format("t{:06}", 19999 - i), empty_tensor);
  const io::SafetensorsFile back = io::decode_safetensors(io::encode_safetensors(f));
  REQUIRE_EQ(back.tensors.size(), 20000);
  // Empty tensors all start at offset 0: they come back in the header's (sorted) order.
  CHECK_EQ(back.tensors.front().first, "t000000");
  CHECK_EQ(back.tensors.back().first, "t019999");
}

// ---- files written all or nothing ----

TEST_CASE("concurrent writers and a reader never see a torn file") {
  // Two writers saving to one path once shared a temporary name: saves failed and reads saw a
  // file cut short.
  TempDir dir("memgrad_faults_test");
  const std::string path = dir.file("shared.bin");
  const std::string a(256 << 10, 'a'), b(192 << 10, 'b');
  write_file_atomically(path, a);
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, torn{0}, reads{0};
  auto writer = [&](const std::string& bytes) {
    for (int i = 0; i < 150; ++i) {
      try {
        write_file_atomically(path, bytes);
      } catch (const IoError&) {
        ++failures;
      }
    }
  };
  std::thread reader([&] {
    while (!done.load()) {
      const std::string got = read_file(path);
      if (got != a && got != b) ++torn;
      ++reads;
    }
  });
  std::thread w1(writer, a), w2(writer, b);
  w1.join();
  w2.join();
  done = true;
  reader.join();
  CHECK_EQ(failures.load(), 0);
  CHECK_EQ(torn.load(), 0);
  CHECK(reads.load() > 0);
  CHECK_EQ(listing(dir.path()), std::vector<std::string>{"shared.bin"});
}

TEST_CASE("saving through a symbolic link replaces its target and keeps the link") {
  TempDir dir("memgrad_faults_test");
  const std::string target = dir.file("real.safetensors");
  const std::string link = dir.file("latest.safetensors");
  io::save_safetensors(target, {{{"w", ones({1})}}, {}});
  std::filesystem::create_symlink("real.safetensors", link);
  io::save_safetensors(link, {{{"w", full({1}, 7.0)}}, {}});
  CHECK(std::filesystem::is_symlink(link));
  CHECK_EQ(io::load_safetensors(target).tensors[0].second.item<double>(), 7.0);
  CHECK_EQ(listing(dir.path()),
           (std::vector<std::string>{"latest.safetensors", "real.safetensors"}));
}

TEST_CASE("a file name of the longest length the file system allows can be written") {
  TempDir dir("memgrad_faults_test");
  const std::string name(255, 'n');  // NAME_MAX: a suffixed temporary name would not fit
  write_file_atomically(dir.file(name), "payload");
  CHECK_EQ(read_file(dir.file(name)), "payload");
  CHECK_EQ(listing(dir.path()), std::vector<std::string>{name});
}

TEST_CASE("a write the disk refuses keeps the old file and leaves no temporary file") {
  TempDir dir("memgrad_faults_test");
  const std::string path = dir.file("model.bin");
  write_file_atomically(path, "old contents");
  // A file-size limit of 4 KiB stands in for a full disk: write() fails with EFBIG.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &previous);
  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  std::string error;
  try {
    write_file_atomically(path, std::string(1 << 20, 'x'));
  } catch (const IoError& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  sigaction(SIGXFSZ, &previous, nullptr);
  CHECK(error.find("cannot write") != std::string::npos);
  CHECK(error.find(path) != std::string::npos);
  CHECK_EQ(read_file(path), "old contents");
  CHECK_EQ(listing(dir.path()), std::vector<std::string>{"model.bin"});
  // A folder that cannot be written: an IoError naming the path, and nothing created.
  std::filesystem::permissions(
      dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  if (::access(dir.path().c_str(), W_OK) != 0) {  // root ignores permissions
    CHECK_THROWS_WITH_AS(write_file_atomically(dir.file("new.bin"), "x"),
                         doctest::Contains("creating a temporary file"), IoError);
  }
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  CHECK_EQ(listing(dir.path()), std::vector<std::string>{"model.bin"});
}

TEST_CASE("the next save removes the temporary files of writers that were killed") {
  TempDir dir("memgrad_faults_test");
  const std::string path = dir.file("model.bin");
  const std::string prefix = temporary_prefix(path);
  CHECK(prefix.starts_with(".memgrad-"));
  CHECK_NE(prefix, temporary_prefix(dir.file("other.bin")));
  // Three writers killed mid-save (SIGKILL): each leaves its locked temporary file, whose lock
  // dies with it.
  for (int k = 0; k < 3; ++k) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::string name = dir.file(prefix + "XXXXXX");
      const int fd = ::mkstemp(name.data());
      if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::write(fd, "partial", 7) != 7) ::_exit(1);
      // Killed a minute ago.
      const timespec past[2] = {{::time(nullptr) - 60, 0}, {::time(nullptr) - 60, 0}};
      if (::futimens(fd, past) != 0) ::_exit(1);
      ::kill(::getpid(), SIGKILL);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
  }
  // A file created a moment ago and not locked yet: a writer between mkstemp and flock.
  const std::string fresh = dir.file(prefix + "fresh0");
  std::ofstream(fresh) << "x";
  // A live writer's file (locked now), and another target's stale file.
  const std::string live = dir.file(prefix + "live00");
  const int held = ::open(live.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  REQUIRE(held >= 0);
  REQUIRE_EQ(::flock(held, LOCK_EX), 0);
  const std::string other = dir.file(temporary_prefix(dir.file("other.bin")) + "abcdef");
  std::ofstream(other) << "x";
  CHECK_EQ(listing(dir.path()).size(), 6);
  write_file_atomically(path, "new contents");
  CHECK_EQ(read_file(path), "new contents");
  const std::vector<std::string> left = listing(dir.path());
  CHECK_EQ(left.size(), 4);  // the target, the live and the fresh writers' files, the other's
  CHECK(std::find(left.begin(), left.end(), std::filesystem::path(fresh).filename()) != left.end());
  CHECK(std::find(left.begin(), left.end(), std::filesystem::path(live).filename()) != left.end());
  CHECK(std::find(left.begin(), left.end(), std::filesystem::path(other).filename()) != left.end());
  ::close(held);
}

}  // TEST_SUITE("nn")
