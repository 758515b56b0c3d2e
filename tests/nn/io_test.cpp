// safetensors files (bit-exact round trips, the layout the spec prescribes, every kind of
// corruption rejected with a CheckpointError, atomic saves) and training checkpoints that resume
// to bit-identical losses, dropout included.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "engine/io/checkpoint.h"
#include "engine/io/safetensors.h"
#include "engine/nn/functional.h"
#include "engine/nn/layers.h"
#include "engine/nn/linear.h"
#include "engine/optim/optimizer.h"
#include "tests/support/error_check.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_check.h"

#ifndef MEMGRAD_SOURCE_ROOT
#define MEMGRAD_SOURCE_ROOT "."
#endif

using namespace memgrad;
using memgrad::testing::check_checkpoint_error;
using memgrad::testing::check_values;
using memgrad::testing::TempDir;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A tensor of `dtype` and `sizes` holding exactly `bits` (raw element bytes).
template <typename Bits>
Tensor from_bits(const std::vector<Bits>& bits, const Shape& sizes, DType dtype) {
  Tensor t = empty(sizes, dtype);
  REQUIRE_EQ(t.nbytes(), bits.size() * sizeof(Bits));
  if (!bits.empty()) std::memcpy(t.data_ptr(), bits.data(), t.nbytes());
  return t;
}

// Raw bytes of a tensor (row-major, on the host).
std::string bytes_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  return {static_cast<const char*>(c.data_ptr()), c.nbytes()};
}

// One tensor of every dtype and tricky shape, float bit patterns included.
io::SafetensorsFile every_dtype() {
  io::SafetensorsFile f;
  // NaN, a NaN with a payload, +inf, -inf, -0.0, the smallest denormal, the largest float, 1.
  f.tensors.emplace_back(
      "f32", from_bits<uint32_t>({0x7fc00000u, 0x7f800123u, 0x7f800000u, 0xff800000u, 0x80000000u,
                                  0x00000001u, 0x7f7fffffu, 0x3f800000u},
                                 {8}, kFloat32));
  f.tensors.emplace_back("f64", from_bits<uint64_t>({0x8000000000000000ull, 0x7ff8000000000001ull,
                                                     0x0000000000000001ull, 0x3ff0000000000000ull,
                                                     0xfff0000000000000ull, 0x4009219652bd3c36ull},
                                                    {2, 3}, kFloat64));
  f.tensors.emplace_back(
      "f16",
      from_bits<uint16_t>({0x7c00, 0xfc00, 0x7e00, 0x8000, 0x0001, 0x3c00}, {3, 2}, kFloat16));
  // bfloat16: +inf, -inf, NaN, -0.0, the smallest denormal, 1, the largest finite, pi rounded.
  f.tensors.emplace_back(
      "bf16", from_bits<uint16_t>({0x7f80, 0xff80, 0x7fc0, 0x8000, 0x0001, 0x3f80, 0x7f7f, 0x4049},
                                  {2, 4}, kBFloat16));
  f.tensors.emplace_back("i64", from_bits<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0,
                                                    std::numeric_limits<int64_t>::max()},
                                                   {2, 2}, kInt64));
  f.tensors.emplace_back("bool", from_bits<uint8_t>({1, 0, 1}, {3}, kBool));
  f.tensors.emplace_back("scalar", from_bits<uint32_t>({0x40490fdbu}, {}, kFloat32));
  f.tensors.emplace_back("empty", empty({0, 3}));
  f.tensors.emplace_back("cube", arange(24, kFloat32).view({2, 3, 4}));
  f.tensors.emplace_back("transposed", arange(6, kFloat64).view({2, 3}).t());  // not contiguous
  return f;
}

void check_same_tensors(const nn::StateDict& got, const nn::StateDict& expected) {
  REQUIRE_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(expected[i].first);
    CHECK_EQ(got[i].first, expected[i].first);
    CHECK_EQ(got[i].second.dtype(), expected[i].second.dtype());
    CHECK_EQ(got[i].second.sizes(), expected[i].second.sizes());
    CHECK(bytes_of(got[i].second) == bytes_of(expected[i].second));  // bit-exact
  }
}

// A file of 8 bytes of little-endian header length, the header, then the data.
std::string craft(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// The header of one tensor 'a' (dtype, shape and offsets given as JSON text).
std::string one(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return fmt::format(R"({{"a": {{"dtype": {}, "shape": {}, "data_offsets": {}}}}})", dtype, shape,
                     offsets);
}

std::string with_length(uint64_t n, const std::string& rest) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + rest;
}

// The tiny model of the checkpoint test: dropout makes the generator state part of training.
class Net : public nn::UnaryModule {
 public:
  Net() {
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(4, 16));
    drop_ = register_module("drop", std::make_shared<nn::Dropout>(0.3));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
  }
  Tensor forward(const Tensor& x) override {
    return fc2_->forward(drop_->forward(tanh(fc1_->forward(x))));
  }
  std::string name() const override { return "Net"; }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_;
  std::shared_ptr<nn::Dropout> drop_;
};

struct Batch {
  Tensor x, y;
};

Batch fixed_batch() {
  Generator g(77);
  return {randn({32, 4}, {}, &g), randint(0, 3, {32}, kInt64, &g)};
}

// k Adam steps; the losses exactly as computed (float32 values widened to double).
std::vector<double> train(Net& net, optim::Optimizer& opt, const Batch& b, int k) {
  std::vector<double> losses;
  for (int i = 0; i < k; ++i) {
    const Tensor loss = nn::cross_entropy(net.forward(b.x), b.y);
    losses.push_back(loss.item<double>());
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  return losses;
}

}  // namespace

TEST_SUITE("nn") {
TEST_CASE("safetensors round-trips every dtype and shape bit-exactly") {
  const io::SafetensorsFile f = every_dtype();
  const io::SafetensorsFile back = io::decode_safetensors(io::encode_safetensors(f));
  check_same_tensors(back.tensors, f.tensors);
  CHECK(back.metadata.empty());
  TempDir dir("memgrad_io_test");
  const std::string path = dir.file("all.safetensors");
  io::save_safetensors(path, f);
  check_same_tensors(io::load_safetensors(path).tensors, f.tensors);
  // Loading onto another device; saving from another device.
  const io::SafetensorsFile on_sim = io::load_safetensors(path, Device("sim:0"));
  for (const auto& [name, t] : on_sim.tensors) CHECK_EQ(t.device(), Device("sim:0"));
  check_same_tensors(on_sim.tensors, f.tensors);
  io::SafetensorsFile from_sim{on_sim.tensors, {}};
  CHECK(io::encode_safetensors(from_sim) == io::encode_safetensors(f));
}

TEST_CASE("safetensors metadata round-trips as strings") {
  io::SafetensorsFile f;
  f.tensors.emplace_back("w", ones({2}));
  f.metadata = {{"format", "pt"},
                {"quote\"and\\slash", "line\nbreak"},
                {"unicode", "\xc3\xa9t\xc3\xa9"},
                {"empty", ""}};
  const io::SafetensorsFile back = io::decode_safetensors(io::encode_safetensors(f));
  CHECK_EQ(back.metadata, f.metadata);
  // No tensors at all is a valid file too.
  const io::SafetensorsFile only_meta =
      io::decode_safetensors(io::encode_safetensors({{}, {{"a", "b"}}}));
  CHECK(only_meta.tensors.empty());
  CHECK_EQ(only_meta.metadata.at("a"), "b");
}

TEST_CASE("the file layout follows the safetensors spec") {
  io::SafetensorsFile f = every_dtype();
  f.metadata = {{"format", "pt"}};
  const std::string bytes = io::encode_safetensors(f);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t{static_cast<unsigned char>(bytes[static_cast<size_t>(i)])} << (8 * i);
  REQUIRE(8 + n <= bytes.size());
  CHECK_EQ(n % 8, 0);  // padded (with spaces) so the data starts 8-byte aligned
  const std::string header_text = bytes.substr(8, n);
  CHECK_EQ(header_text.front(), '{');
  CHECK_EQ(header_text.find_first_not_of(' ', header_text.rfind('}') + 1), std::string::npos);
  const nlohmann::json header = nlohmann::json::parse(header_text);
  REQUIRE(header.is_object());
  CHECK_EQ(header.at("__metadata__"), nlohmann::json{{"format", "pt"}});
  const std::map<std::string, std::pair<std::string, std::vector<int64_t>>> expected{
      {"f32", {"F32", {8}}},          {"f64", {"F64", {2, 3}}},   {"f16", {"F16", {3, 2}}},
      {"bf16", {"BF16", {2, 4}}},     {"i64", {"I64", {2, 2}}},   {"bool", {"BOOL", {3}}},
      {"scalar", {"F32", {}}},        {"empty", {"F32", {0, 3}}}, {"cube", {"F32", {2, 3, 4}}},
      {"transposed", {"F64", {3, 2}}}};
  CHECK_EQ(header.size(), expected.size() + 1);
  const std::string data = bytes.substr(8 + n);
  uint64_t covered = 0;
  for (const auto& [name, t] : f.tensors) {
    CAPTURE(name);
    const nlohmann::json& e = header.at(name);
    CHECK_EQ(e.size(), 3);
    CHECK_EQ(e.at("dtype").get<std::string>(), expected.at(name).first);
    CHECK_EQ(e.at("shape").get<std::vector<int64_t>>(), expected.at(name).second);
    const auto offsets = e.at("data_offsets").get<std::vector<uint64_t>>();
    REQUIRE_EQ(offsets.size(), 2);
    // Tensors are laid out in order, back to back, from offset 0 (relative to the data start).
    CHECK_EQ(offsets[0], covered);
    CHECK_EQ(offsets[1] - offsets[0], t.nbytes());
    CHECK(data.substr(offsets[0], offsets[1] - offsets[0]) == bytes_of(t));
    covered = offsets[1];
  }
  CHECK_EQ(covered, data.size());  // the data holds the tensors and nothing else
  // Little-endian: the scalar 3.14159274f is 0x40490fdb, stored db 0f 49 40.
  const uint64_t at = header.at("scalar").at("data_offsets").at(0).get<uint64_t>();
  CHECK(data.substr(at, 4) == std::string("\xdb\x0f\x49\x40", 4));
}

TEST_CASE("every corrupt safetensors file is a CheckpointError, never a crash") {
  const std::string d16(16, '\0');
  const std::string f32 = R"("F32")";
  struct Case {
    std::string name;
    std::string bytes;
    const char* message;
  };
  const std::string valid = io::encode_safetensors(every_dtype());
  const std::vector<Case> cases{
      {"empty", "", "0 bytes, too short for the header length"},
      {"seven bytes", std::string(7, '\0'), "7 bytes, too short"},
      {"header beyond the file", with_length(1000, "{}"),
       "the header claims 1000 bytes but only 2 follow"},
      {"huge header length", with_length(std::numeric_limits<uint64_t>::max(), "{}"),
       "the header claims"},
      {"zero header length", with_length(0, ""), "not valid JSON"},
      {"invalid JSON", craft("{\"a\": "), "not valid JSON"},
      {"not an object", craft("[1, 2]"), "not a JSON object"},
      {"metadata not an object", craft(R"({"__metadata__": 3})"), "__metadata__ is not an object"},
      {"metadata value not a string", craft(R"({"__metadata__": {"a": 1}})"),
       "metadata 'a' is not a string"},
      {"entry not an object", craft(R"({"a": 5})"), "tensor 'a' lacks dtype"},
      {"missing dtype", craft(R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", d16.substr(0, 8)),
       "lacks dtype"},
      {"missing shape",
       craft(R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", d16.substr(0, 8)),
       "lacks dtype"},
      {"missing offsets", craft(R"({"a": {"dtype": "F32", "shape": [2]}})", d16.substr(0, 8)),
       "lacks dtype"},
      {"three offsets", craft(one(f32, "[2]", "[0, 4, 8]"), d16), "pair of data_offsets"},
      {"dtype not a string", craft(one(R"(7)", "[2]", "[0, 8]"), d16), "lacks dtype"},
      {"unknown dtype", craft(one(R"("F8_E4M3")", "[2]", "[0, 4]"), d16),
       "has dtype 'F8_E4M3', which memgrad does not support"},
      {"negative size", craft(one(f32, "[-2]", "[0, 8]"), d16), "tensor 'a' has a bad shape"},
      {"fractional size", craft(one(f32, "[1.5]", "[0, 8]"), d16), "bad shape"},
      {"text size", craft(one(f32, R"(["2"])", "[0, 8]"), d16), "bad shape"},
      {"size beyond int64", craft(one(f32, "[9223372036854775808, 0]", "[0, 0]")), "bad shape"},
      {"sizes overflowing", craft(one(f32, "[4611686018427387904, 4]", "[0, 16]"), d16),
       "tensor 'a'"},
      {"sizes overflowing to zero", craft(one(f32, "[4294967296, 4294967296]", "[0, 0]")),
       "tensor 'a'"},
      {"nine dimensions", craft(one(f32, "[1,1,1,1,1,1,1,1,2]", "[0, 8]"), d16), "tensor 'a'"},
      {"negative offset", craft(one(f32, "[2]", "[-1, 7]"), d16), "non-integer data offsets"},
      {"text offset", craft(one(f32, "[2]", R"(["0", 8])"), d16), "non-integer data offsets"},
      {"offsets reversed", craft(one(f32, "[1]", "[8, 4]"), d16), "has offsets [8, 4) outside"},
      {"offsets beyond the data", craft(one(f32, "[8]", "[0, 32]"), d16),
       "offsets [0, 32) outside the 16 data bytes"},
      {"offsets inconsistent with the shape", craft(one(f32, "[2]", "[0, 12]"), d16),
       "needs 8 bytes but its offsets span 12"},
      {"overlapping tensors",
       craft(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
             d16),
       "two tensors overlap"},
      {"truncated data", valid.substr(0, valid.size() - 1), "outside the"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK_THROWS_WITH_AS(io::decode_safetensors(c.bytes, "crafted"),
                         doctest::Contains("[safetensors] crafted"), CheckpointError);
    CHECK_THROWS_WITH_AS(io::decode_safetensors(c.bytes, "crafted"), doctest::Contains(c.message),
                         CheckpointError);
  }
}

TEST_CASE("every prefix and many one-byte corruptions of a file fail cleanly") {
  const std::string valid = io::encode_safetensors(every_dtype());
  // Every proper prefix is rejected (the last tensor is not empty, so its end lies beyond).
  for (size_t len = 0; len < valid.size(); len += 7) {
    CAPTURE(len);
    CHECK_THROWS_AS(io::decode_safetensors(valid.substr(0, len)), CheckpointError);
  }
  // Any header byte replaced by characters that break or twist the JSON: a CheckpointError or a
  // valid file, nothing else.
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t{static_cast<unsigned char>(valid[static_cast<size_t>(i)])} << (8 * i);
  int rejected = 0;
  for (size_t pos = 8; pos < 8 + n; ++pos) {
    for (char c : {'"', '}', '9', '-', '\0', '['}) {
      std::string bad = valid;
      bad[pos] = c;
      try {
        io::decode_safetensors(bad, "fuzzed");
      } catch (const CheckpointError&) {
        ++rejected;
      } catch (const std::exception& e) {
        FAIL_CHECK(
            fmt::format("byte {} := '{}' threw a non-checkpoint error: {}", pos, c, e.what()));
      }
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("save_safetensors replaces files atomically and leaves no temporary behind") {
  TempDir dir("memgrad_io_test");
  const std::string path = dir.file("model.safetensors");
  io::save_safetensors(path, {{{"w", ones({3})}}, {}});
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      names.push_back(e.path().filename().string());
    }
    return names;
  };
  CHECK_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  io::save_safetensors(path, {{{"v", full({2}, 7.0)}}, {{"k", "v"}}});
  CHECK_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  const io::SafetensorsFile back = io::load_safetensors(path);
  REQUIRE_EQ(back.tensors.size(), 1);
  CHECK_EQ(back.tensors[0].first, "v");
  check_values(back.tensors[0].second, {2}, {7, 7});
  CHECK_EQ(back.metadata.at("k"), "v");
  // Saving into a directory that does not exist fails and creates nothing.
  const std::string missing_dir = dir.file("no-such-dir");
  check_checkpoint_error(
      [&] {
        io::save_safetensors(missing_dir + "/x.safetensors", {{{"w", ones({1})}}, {}});
      },
      "safetensors", missing_dir + "/x.safetensors");
  CHECK_FALSE(std::filesystem::exists(missing_dir));
  CHECK_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  check_checkpoint_error([&] { io::load_safetensors(dir.file("absent.safetensors")); },
                         "safetensors", dir.file("absent.safetensors"));
  // A file on disk that is corrupt names the file.
  const std::string bad = dir.file("bad.safetensors");
  std::ofstream(bad, std::ios::binary) << "garbage";
  check_checkpoint_error([&] { io::load_safetensors(bad); }, "safetensors", bad);
}

TEST_CASE("save_state_dict and load_state_dict restore a model exactly") {
  manual_seed(21);
  Net a;
  manual_seed(22);
  Net b;
  TempDir dir("memgrad_io_test");
  const std::string path = dir.file("net.safetensors");
  io::save_state_dict(path, a.state_dict());
  b.load_state_dict(io::load_state_dict(path));
  check_same_tensors(b.state_dict(), a.state_dict());
  a.eval();
  b.eval();
  const Tensor x = randn({5, 4});
  CHECK(equal(a.forward(x), b.forward(x)));
}

TEST_CASE("a training checkpoint resumes to bit-identical losses, dropout included") {
  constexpr int kSteps = 4;
  const Batch batch = fixed_batch();
  TempDir dir("memgrad_io_test");
  const std::string path = dir.file("ckpt.safetensors");

  manual_seed(1);
  Net net;
  optim::Adam opt(net.parameters(), {.lr = 0.01});
  train(net, opt, batch, kSteps);
  io::TrainingState state;
  state.step = kSteps;
  state.epoch = 1;
  state.generator = default_generator(kCPU).get_state();
  state.extra["note"] = "resumable";
  io::save_checkpoint(path, net, opt, state);
  const std::vector<double> expected = train(net, opt, batch, kSteps);

  // A fresh model (other initial weights) and optimizer, and another generator state.
  manual_seed(999);
  Net fresh;
  optim::Adam fresh_opt(fresh.parameters(), {.lr = 0.5});
  const io::TrainingState loaded = io::load_checkpoint(path, fresh, fresh_opt);
  CHECK_EQ(loaded.step, kSteps);
  CHECK_EQ(loaded.epoch, 1);
  CHECK(loaded.generator == state.generator);
  CHECK_EQ(loaded.extra.at("note"), "resumable");
  CHECK_EQ(fresh_opt.lr(), 0.01);
  const std::vector<double> resumed = train(fresh, fresh_opt, batch, kSteps);
  CHECK_EQ(resumed, expected);  // bit-exact

  // The generator state matters: resuming with another one gives other dropout masks.
  manual_seed(999);
  Net other;
  optim::Adam other_opt(other.parameters(), {.lr = 0.01});
  io::load_checkpoint(path, other, other_opt);
  default_generator(kCPU).set_state({state.generator.seed, state.generator.offset + 1000});
  CHECK_NE(train(other, other_opt, batch, kSteps), expected);
}

TEST_CASE("loading a checkpoint into the wrong model or from a plain file is refused") {
  TempDir dir("memgrad_io_test");
  Net net;
  optim::Adam opt(net.parameters(), {});
  const std::string path = dir.file("ckpt.safetensors");
  io::save_checkpoint(path, net, opt, {});
  nn::Linear wrong(4, 16);
  optim::Adam wrong_opt(wrong.parameters(), {});
  CHECK_THROWS_WITH_AS(io::load_checkpoint(path, wrong, wrong_opt),
                       doctest::Contains("Missing key(s): \"weight\", \"bias\"."), CheckpointError);
  const std::string plain = dir.file("plain.safetensors");
  io::save_state_dict(plain, net.state_dict());
  CHECK_THROWS_WITH_AS(io::load_checkpoint(plain, net, opt),
                       doctest::Contains("not a training checkpoint written by memgrad"),
                       CheckpointError);
}

TEST_CASE("tools/check_safetensors.py validates the files memgrad writes") {
  // ./memgrad test names its venv with the PyPI safetensors client (MEMGRAD_PYTHON): the file is
  // then also loaded by safetensors + numpy, every tensor compared byte for byte.
  const char* venv_python = std::getenv("MEMGRAD_PYTHON");
  const std::string python = venv_python != nullptr ? venv_python : "/usr/bin/python3";
  const std::string script = std::string(MEMGRAD_SOURCE_ROOT) + "/tools/check_safetensors.py";
  if (!std::filesystem::exists(python) || !std::filesystem::exists(script)) {
    MESSAGE("skipped: needs " << python << " and " << script);
    return;
  }
  TempDir dir("memgrad_io_test");
  io::SafetensorsFile f = every_dtype();
  f.metadata = {{"format", "pt"}};
  const std::string good = dir.file("good.safetensors");
  io::save_safetensors(good, f);
  const std::string out = dir.file("out.txt");
  const int status =
      std::system((python + " " + script + " " + good + " > " + out + " 2>&1").c_str());
  const std::string printed = read_file(out);
  CAPTURE(printed);
  REQUIRE(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  for (const char* line : {"f32 F32 [8]", "f64 F64 [2, 3]", "f16 F16 [3, 2]", "bf16 BF16 [2, 4]",
                           "i64 I64 [2, 2]", "bool BOOL [3]", "scalar F32 []", "empty F32 [0, 3]",
                           "cube F32 [2, 3, 4]", "transposed F64 [3, 2]"}) {
    CHECK(printed.find(line) != std::string::npos);
  }
  if (venv_python != nullptr) CHECK(printed.find("loads the same 10 tensors") != std::string::npos);
  // A file with a hole between tensors is not valid safetensors: the checker says so.
  const std::string bad = dir.file("bad.safetensors");
  std::ofstream(bad, std::ios::binary)
      << craft(one(R"("F32")", "[1]", "[4, 8]"), std::string(8, '\0'));
  const int bad_status =
      std::system((python + " " + script + " " + bad + " > " + out + " 2>&1").c_str());
  REQUIRE(WIFEXITED(bad_status));
  CHECK_NE(WEXITSTATUS(bad_status), 0);
}

}  // TEST_SUITE("nn")
