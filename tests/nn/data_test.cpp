// Datasets and the DataLoader (coverage, seeded shuffling, drop_last, prefetching, flat memory
// for datasets that generate their items), and the IDX and CSV readers on files written here,
// with every malformed case a CheckpointError naming the file.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/autograd.h"
#include "engine/data/data_loader.h"
#include "engine/data/readers.h"
#include "tests/support/error_check.h"
#include "tests/support/stats_delta.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_check.h"

using namespace memgrad;
using memgrad::testing::caught;
using memgrad::testing::check_checkpoint_error;
using memgrad::testing::check_shape;
using memgrad::testing::check_value_error;
using memgrad::testing::check_values;
using memgrad::testing::rounded;
using memgrad::testing::StatsDelta;
using memgrad::testing::TempDir;

namespace {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
             static_cast<int>(bytes.size()));
  REQUIRE_EQ(gzclose(f), Z_OK);
}

void append_u32_be(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

// An IDX file of unsigned bytes: magic 00 00 08 ndim, big-endian sizes, then the values.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values,
                      uint8_t type = 0x08) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) append_u32_be(s, d);
  s.append(values.begin(), values.end());
  return s;
}

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// n items whose input is [i, i] and target i.
data::TensorDataset numbered(int64_t n) {
  const Tensor idx = arange(n, kInt64);
  return data::TensorDataset(stack({idx, idx}, 1).to(kFloat32), idx);
}

// All targets of one epoch, in delivery order.
std::vector<int64_t> epoch_targets(data::DataLoader& loader) {
  std::vector<int64_t> out;
  while (auto batch = loader.next()) {
    const std::vector<int64_t> t = batch->target.to_vector<int64_t>();
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

// A dataset that holds nothing: item i is generated when asked (64 floats of value i).
class Generated final : public data::Dataset {
 public:
  explicit Generated(size_t n) : n_(n) {}
  size_t size() const override { return n_; }
  data::Example get(size_t i) const override {
    if (i >= n_) {
      throw IndexError("[Generated] index out of range", "Generated",
                       {.index = static_cast<int64_t>(i), .size = static_cast<int64_t>(n_)});
    }
    return {full({64}, static_cast<double>(i)), scalar_tensor(static_cast<int64_t>(i), kInt64)};
  }

 private:
  size_t n_;
};

// Generated items whose first batch takes `delay` to fill; it records where each batch's input
// buffer lies and when the worker starts filling batch 0.
class SlowFirstBatch final : public data::Dataset {
 public:
  SlowFirstBatch(size_t n, std::chrono::milliseconds delay) : items_(n), delay_(delay) {}
  size_t size() const override { return items_.size(); }
  data::Example get(size_t i) const override { return items_.get(i); }
  data::Example empty_batch(size_t n) const override {
    data::Example out = items_.empty_batch(n);
    inputs.push_back(reinterpret_cast<uint64_t>(out.input.data_ptr()));
    return out;
  }
  void fill_batch(const std::vector<size_t>& indices, data::Example& out) const override {
    if (indices.front() == 0) {
      filling_first = true;
      std::this_thread::sleep_for(delay_);
    }
    items_.fill_batch(indices, out);
  }
  mutable std::vector<uint64_t> inputs;  // batch k's input buffer (caller's thread only)
  mutable std::atomic<bool> filling_first{false};

 private:
  Generated items_;
  std::chrono::milliseconds delay_;
};

// A dataset whose item `bad` cannot be produced.
class Faulty final : public data::Dataset {
 public:
  Faulty(size_t n, size_t bad) : n_(n), bad_(bad) {}
  size_t size() const override { return n_; }
  data::Example get(size_t i) const override {
    if (i == bad_) {
      throw IndexError("[Faulty] item " + std::to_string(i) + " is unreadable", "Faulty",
                       {.index = static_cast<int64_t>(i), .size = static_cast<int64_t>(n_)});
    }
    return {full({2}, static_cast<double>(i)), scalar_tensor(static_cast<int64_t>(i), kInt64)};
  }

 private:
  size_t n_, bad_;
};

}  // namespace

TEST_SUITE("nn") {
TEST_CASE("TensorDataset returns views for items and one gather per batch") {
  const data::TensorDataset ds = numbered(5);
  CHECK_EQ(ds.size(), 5);
  StatsDelta d(allocator_for(kCPU));
  const data::Example e = ds.get(3);
  CHECK_EQ(d.allocated(), 0);  // items are views of the dataset's tensors
  check_values(e.input, {2}, {3, 3});
  CHECK_EQ(e.target.item<int64_t>(), 3);
  CHECK(e.input.shares_storage_with(ds.inputs()));
  const data::Example b = ds.get_batch({4, 0, 2});
  CHECK_EQ(d.allocated(), rounded(3 * 2 * 4) + rounded(3 * 8));  // the batch; the index is freed
  check_values(b.input, {3, 2}, {4, 4, 0, 0, 2, 2});
  CHECK_EQ(b.target.to_vector<int64_t>(), std::vector<int64_t>{4, 0, 2});
  CHECK_THROWS_WITH_AS(ds.get(5), doctest::Contains("index 5 out of range for 5 items"),
                       IndexError);
  const auto item = caught<IndexError>([&] { (void)ds.get(5); });
  REQUIRE(item);
  CHECK_EQ(item->op(), "TensorDataset");
  CHECK(item->index() == 5);
  CHECK(item->size() == 5);
  // A batch reads through index_select, whose error names the position in the batch.
  const auto batch = caught<IndexError>([&] { (void)ds.get_batch({1, 7}); });
  REQUIRE(batch);
  CHECK_EQ(batch->op(), "index_select");
  CHECK(batch->index() == 7);
  CHECK(batch->position() == 1);
  CHECK_THROWS_WITH_AS(data::TensorDataset(zeros({4, 2}), zeros({3})),
                       doctest::Contains("inputs [4, 2] and targets [3]"), ShapeError);
  const auto mismatch = caught<ShapeError>([] {
    (void)data::TensorDataset(zeros({4, 2}), zeros({3}));
  });
  REQUIRE(mismatch);
  check_shape(mismatch->lhs(), {4, 2}, "lhs");
  check_shape(mismatch->rhs(), {3}, "rhs");
  // The default get_batch stacks the items.
  const Generated gen(10);
  const data::Example g = gen.get_batch({7, 1});
  CHECK_EQ(g.input.sizes(), Shape{2, 64});
  CHECK_EQ(g.target.to_vector<int64_t>(), std::vector<int64_t>{7, 1});
}

TEST_CASE("DataLoader covers every item once per epoch in a seeded shuffled order") {
  const data::TensorDataset ds = numbered(103);
  data::DataLoader loader(ds, {.batch_size = 10, .shuffle = true, .seed = 5});
  CHECK_EQ(loader.num_batches(), 11);
  std::vector<size_t> sizes;
  std::vector<int64_t> epoch0;
  while (auto batch = loader.next()) {
    sizes.push_back(static_cast<size_t>(batch->input.size(0)));
    // input row = [i, i] for target i: rows and targets stay paired.
    CHECK(equal(batch->input.select(1, 0), batch->target.to(kFloat32)));
    const std::vector<int64_t> t = batch->target.to_vector<int64_t>();
    epoch0.insert(epoch0.end(), t.begin(), t.end());
  }
  CHECK_FALSE(loader.next().has_value());  // stays exhausted
  CHECK_EQ(sizes.size(), 11);
  CHECK_EQ(sizes.back(), 3);
  CHECK_EQ(std::vector<size_t>(loader.order().begin(), loader.order().end()).size(), 103);
  for (size_t i = 0; i < epoch0.size(); ++i)
    CHECK_EQ(static_cast<size_t>(epoch0[i]), loader.order()[i]);
  std::vector<int64_t> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(103);
  std::iota(all.begin(), all.end(), 0);
  CHECK_EQ(sorted, all);
  CHECK_NE(epoch0, all);  // shuffled

  loader.start_epoch(1);
  const std::vector<int64_t> epoch1 = epoch_targets(loader);
  CHECK_NE(epoch1, epoch0);
  std::vector<int64_t> sorted1 = epoch1;
  std::sort(sorted1.begin(), sorted1.end());
  CHECK_EQ(sorted1, all);
  // Another loader with the same seed gives the same order for the same epoch.
  data::DataLoader again(ds, {.batch_size = 7, .shuffle = true, .seed = 5});
  again.start_epoch(1);
  CHECK_EQ(epoch_targets(again), epoch1);
  again.start_epoch(0);
  CHECK_EQ(epoch_targets(again), epoch0);
  // Without shuffling: 0, 1, 2, ...
  data::DataLoader plain(ds, {.batch_size = 10});
  CHECK_EQ(epoch_targets(plain), all);
  // A different seed: a different order.
  data::DataLoader other(ds, {.batch_size = 10, .shuffle = true, .seed = 6});
  CHECK_NE(epoch_targets(other), epoch0);
}

TEST_CASE("DataLoader drop_last drops the short final batch") {
  const data::TensorDataset ds = numbered(103);
  data::DataLoader loader(ds, {.batch_size = 10, .shuffle = true, .drop_last = true});
  CHECK_EQ(loader.num_batches(), 10);
  size_t batches = 0;
  std::vector<int64_t> seen;
  while (auto batch = loader.next()) {
    ++batches;
    CHECK_EQ(batch->input.size(0), 10);
    const std::vector<int64_t> t = batch->target.to_vector<int64_t>();
    seen.insert(seen.end(), t.begin(), t.end());
  }
  CHECK_EQ(batches, 10);
  std::sort(seen.begin(), seen.end());
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // no duplicates
  const data::TensorDataset small = numbered(3);
  data::DataLoader none(small, {.batch_size = 4, .drop_last = true});
  CHECK_EQ(none.num_batches(), 0);
  CHECK_FALSE(none.next().has_value());
  data::DataLoader one(small, {.batch_size = 4});
  CHECK_EQ(one.num_batches(), 1);
  check_value_error([&] { data::DataLoader(small, {.batch_size = 0}); }, "DataLoader",
                    "batch_size");
}

TEST_CASE("DataLoader gives identical batches with and without prefetching") {
  const data::TensorDataset ds = numbered(57);
  std::vector<std::vector<data::Example>> runs;
  for (size_t prefetch : {0, 1, 3}) {
    data::DataLoader loader(ds,
                            {.batch_size = 8, .shuffle = true, .seed = 9, .prefetch = prefetch});
    loader.start_epoch(2);
    std::vector<data::Example> batches;
    while (auto batch = loader.next()) batches.push_back(*batch);
    runs.push_back(std::move(batches));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    CAPTURE(r);
    REQUIRE_EQ(runs[r].size(), runs[0].size());
    for (size_t b = 0; b < runs[0].size(); ++b) {
      CHECK(equal(runs[r][b].input, runs[0][b].input));
      CHECK(equal(runs[r][b].target, runs[0][b].target));
    }
  }
}

TEST_CASE("DataLoader holds exactly `prefetch` batches ahead and frees them when destroyed") {
  const data::TensorDataset ds = numbered(100);
  // One batch of 10: inputs 10 x 2 floats and targets 10 int64, each rounded to 512 bytes.
  const int64_t batch = rounded(10 * 2 * 4) + rounded(10 * 8);
  StatsDelta d(allocator_for(kCPU));
  std::optional<data::Example> held;
  {
    data::DataLoader loader(ds, {.batch_size = 10, .prefetch = 3});
    loader.wait_until_prefetched();
    CHECK_EQ(d.allocated(), 3 * batch);
    held = loader.next();
    loader.wait_until_prefetched();
    CHECK_EQ(d.allocated(), 4 * batch);  // the one handed out, and three more ahead
    data::DataLoader eager(ds, {.batch_size = 10, .prefetch = 0});
    CHECK_EQ(d.allocated(), 4 * batch);  // prefetch 0 builds nothing ahead
  }
  // Destroying the loader mid-epoch stopped its thread and freed the batches it held.
  CHECK_EQ(d.allocated(), batch);
  REQUIRE(held.has_value());
  CHECK_EQ(held->target.to_vector<int64_t>(), std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  held.reset();
  CHECK_EQ(d.allocated(), 0);
}

TEST_CASE("DataLoader allocates prefetched batches on the calling thread, in a fixed order") {
  // The background thread only fills batches, so the allocator sees every request at once and
  // in the same order on every run: no waiting is needed before reading the bytes.
  const data::TensorDataset ds = numbered(100);
  const int64_t batch = rounded(10 * 2 * 4) + rounded(10 * 8);
  const auto requests = [] { return allocator_for(kCPU).stats().allocation.all().allocated; };
  const int64_t requests_before = requests();
  StatsDelta d(allocator_for(kCPU));
  data::DataLoader loader(ds, {.batch_size = 10, .prefetch = 2});
  CHECK_EQ(d.allocated(), 2 * batch);  // allocated by the constructor, before it returned
  const std::optional<data::Example> first = loader.next();
  CHECK_EQ(d.allocated(), 3 * batch);  // the batch handed out, and the next one's buffers
  // An input and a target per batch: no per-batch index tensor, no item copies.
  CHECK_EQ(requests() - requests_before, 3 * 2);
}

TEST_CASE(
    "DataLoader frees the batches it prepared ahead in batch order, wherever the worker was") {
  // The worker is still filling batch 0 when a new epoch starts: batch 0 ends up filled, batch 1
  // still waits. Both are freed in batch order all the same, so two runs of a program record the
  // same frees (a snapshot of one run equals a snapshot of the next).
  const SlowFirstBatch ds(40, std::chrono::milliseconds(100));
  PolicyAllocator& cpu = allocator_for(kCPU);
  const bool was_tracing = cpu.trace().enabled();
  cpu.trace().enable();
  std::vector<uint64_t> freed;
  {
    data::DataLoader loader(ds, {.batch_size = 10, .prefetch = 2});
    REQUIRE_EQ(ds.inputs.size(), 2);
    while (!ds.filling_first) std::this_thread::yield();
    const std::vector<uint64_t> first_epoch = ds.inputs;
    loader.start_epoch(1);
    for (const TraceEvent& e : cpu.trace().events()) {
      if (e.action == TraceAction::FreeRequested &&
          std::find(first_epoch.begin(), first_epoch.end(), e.address) != first_epoch.end())
        freed.push_back(e.address);
    }
    CHECK_EQ(freed, first_epoch);
  }
  if (!was_tracing) cpu.trace().disable();
}

TEST_CASE("fill_batch rejects buffers of the wrong size, naming the sizes") {
  const data::TensorDataset ds = numbered(10);
  data::Example out = ds.empty_batch(3);
  CHECK_EQ(out.input.sizes(), Shape{3, 2});
  CHECK_THROWS_WITH_AS(ds.fill_batch({0, 1}, out),
                       doctest::Contains("fill_batch needs tensors of 2 items, got input [3, 2]"),
                       ShapeError);
  ds.fill_batch({4, 0, 2}, out);
  CHECK_EQ(out.target.to_vector<int64_t>(), std::vector<int64_t>{4, 0, 2});
}

TEST_CASE("an error while building a batch reaches next(), with or without prefetching") {
  // PyTorch re-raises a worker's exception in the main process; it must not end the process.
  const Faulty ds(20, 13);
  for (size_t prefetch : {0, 1, 3}) {
    CAPTURE(prefetch);
    data::DataLoader loader(ds, {.batch_size = 4, .prefetch = prefetch});
    for (int64_t b = 0; b < 3; ++b) {  // items 0..11 are fine
      auto batch = loader.next();
      REQUIRE(batch.has_value());
      CHECK_EQ(batch->target[0].item<int64_t>(), 4 * b);
    }
    loader.wait_until_prefetched();  // returns although the worker stopped at the bad batch
    // The worker's error reaches the caller whole: type, message and fields.
    const auto unreadable = caught<IndexError>([&] { (void)loader.next(); });
    REQUIRE(unreadable);
    CHECK(std::string(unreadable->what()).find("item 13 is unreadable") != std::string::npos);
    CHECK_EQ(unreadable->op(), "Faulty");
    CHECK(unreadable->index() == 13);
    // A new epoch starts afresh (and meets the same item again).
    loader.start_epoch(1);
    CHECK(loader.next().has_value());
  }
}

TEST_CASE("DataLoader delivers batches on the requested device") {
  const data::TensorDataset ds = numbered(10);
  data::DataLoader loader(ds, {.batch_size = 4, .device = Device("sim:0")});
  auto batch = loader.next();
  REQUIRE(batch.has_value());
  CHECK_EQ(batch->input.device(), Device("sim:0"));
  CHECK_EQ(batch->target.device(), Device("sim:0"));
  CHECK_EQ(batch->target.cpu().to_vector<int64_t>(), std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("an on-demand dataset keeps memory flat across an epoch") {
  constexpr size_t kItems = 4000, kBatch = 32, kPrefetch = 2;
  const Generated ds(kItems);
  // What one batch costs while it is built: every item (input 64 floats, target one int64,
  // each rounded to 512 bytes) and the stacked result.
  const int64_t batch_bytes = rounded(kBatch * 64 * 4) + rounded(kBatch * 8);
  const int64_t building =
      static_cast<int64_t>(kBatch) * (rounded(64 * 4) + rounded(8)) + batch_bytes;
  const int64_t before = static_cast<int64_t>(memory_allocated(kCPU));
  reset_peak_memory_stats(kCPU);
  int64_t sum = 0;
  size_t batches = 0;
  {
    data::DataLoader loader(ds, {.batch_size = kBatch, .shuffle = true, .prefetch = kPrefetch});
    while (auto batch = loader.next()) {
      sum += batch->target.sum().item<int64_t>();
      ++batches;
    }
    // Every generated item was freed once its batch was used.
    CHECK_EQ(static_cast<int64_t>(memory_allocated(kCPU)), before);
  }
  CHECK_EQ(batches, (kItems + kBatch - 1) / kBatch);
  CHECK_EQ(sum, static_cast<int64_t>(kItems * (kItems - 1) / 2));
  CHECK_EQ(static_cast<int64_t>(memory_allocated(kCPU)), before);
  const int64_t peak = static_cast<int64_t>(max_memory_allocated(kCPU)) - before;
  CAPTURE(peak);
  // At most: the batch in use, kPrefetch waiting, one being built (plus a little for the sum).
  CHECK(peak <= static_cast<int64_t>(kPrefetch + 2) * building);
  CHECK(peak < static_cast<int64_t>(kItems * 64 * 4) / 4);  // far below the whole data set
}

TEST_CASE("read_idx reads plain and gzip-compressed IDX files") {
  TempDir dir("memgrad_data_test");
  const std::string images = dir.file("images-idx3-ubyte");
  const std::vector<uint8_t> pixels = iota_bytes(24, 230);  // 230..253
  write_bytes(images, idx_bytes({2, 3, 4}, pixels));
  const Tensor t = data::read_idx(images);
  std::vector<double> expected;
  for (uint8_t p : pixels) expected.push_back(static_cast<float>(p * (1.0 / 255.0)));
  check_values(t, {2, 3, 4}, expected, 0.0);
  CHECK_EQ(t.dtype(), kFloat32);
  check_values(data::read_idx(images, false, 1.0), {2, 3, 4},
               std::vector<double>(pixels.begin(), pixels.end()), 0.0);

  const std::string labels = dir.file("labels-idx1-ubyte.gz");
  write_gzip(labels, idx_bytes({5}, {3, 1, 4, 1, 5}));
  const Tensor l = data::read_idx(labels, /*as_labels=*/true);
  CHECK_EQ(l.dtype(), kInt64);
  CHECK_EQ(l.to_vector<int64_t>(), std::vector<int64_t>{3, 1, 4, 1, 5});
  // Gzip is recognised by its magic bytes, whatever the name.
  const std::string hidden = dir.file("labels-no-suffix");
  write_gzip(hidden, idx_bytes({2}, {9, 8}));
  CHECK_EQ(data::read_idx(hidden, true).to_vector<int64_t>(), std::vector<int64_t>{9, 8});
}

TEST_CASE("load_mnist reads the four files, compressed or not, and flattens the images") {
  TempDir dir("memgrad_data_test");
  write_gzip(dir.file("train-images-idx3-ubyte.gz"), idx_bytes({3, 2, 2}, iota_bytes(12)));
  write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({3}, {0, 9, 4}));
  write_bytes(dir.file("t10k-images-idx3-ubyte"), idx_bytes({1, 2, 2}, {255, 0, 0, 255}));
  CHECK_THROWS_WITH_AS(data::load_mnist(dir.file("")),
                       doctest::Contains("'t10k-labels-idx1-ubyte' not found"), CheckpointError);
  write_gzip(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes({1}, {7}));
  const data::MnistSplit m = data::load_mnist(dir.file(""));
  CHECK_EQ(m.train.size(), 3);
  CHECK_EQ(m.train.inputs().sizes(), Shape{3, 4});
  CHECK_EQ(m.train.targets().to_vector<int64_t>(), std::vector<int64_t>{0, 9, 4});
  check_values(m.test.inputs(), {1, 4}, {1, 0, 0, 1}, 0.0);
  CHECK_EQ(m.test.targets().item<int64_t>(), 7);
}

TEST_CASE("every malformed IDX file is a CheckpointError naming the file") {
  TempDir dir("memgrad_data_test");
  struct Case {
    std::string name;
    std::string bytes;
    const char* message;
  };
  std::string overflow = idx_bytes({65536, 65536, 65536, 65536}, {});  // 2^64 values claimed
  const std::vector<Case> cases{
      {"empty", "", "is truncated: an IDX header needs at least 4 bytes"},
      {"short-header", std::string("\0\0\x08", 3), "is truncated: an IDX header needs"},
      {"bad-magic", "\x01\x02\x08\x01" + std::string(4, '\0'), "is not an IDX file"},
      {"float-type", idx_bytes({2}, {0, 0, 0, 0, 0, 0, 0, 0}, 0x0D),
       "element type 0x0d is not supported"},
      {"no-dims", idx_bytes({}, {}), "has a bad header (0 dimensions"},
      {"five-dims", idx_bytes({1, 1, 1, 1, 1}, {7}), "has a bad header (5 dimensions"},
      {"cut-sizes", idx_bytes({2, 3}, {}).substr(0, 9), "has a bad header (2 dimensions)"},
      {"truncated", idx_bytes({10}, iota_bytes(7)),
       "header says 10 values of shape [10], the file holds 7"},
      {"padded", idx_bytes({10}, iota_bytes(12)),
       "header says 10 values of shape [10], the file holds more"},
      {"overflowing-sizes", overflow, "has more values than can exist"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string path = dir.file(c.name);
    write_bytes(path, c.bytes);
    check_checkpoint_error([&] { data::read_idx(path); }, "read_idx", path);
    CHECK_THROWS_WITH_AS(data::read_idx(path), doctest::Contains(c.message), CheckpointError);
  }
  check_checkpoint_error([&] { data::read_idx(dir.file("")); }, "read_idx",
                         dir.file(""));  // a directory  // a directory
  const std::string missing = dir.file("does-not-exist");
  check_checkpoint_error([&] { data::read_idx(missing); }, "read_idx", missing);
  // A gzip stream cut short.
  const std::string whole = dir.file("whole.gz");
  write_gzip(whole, idx_bytes({4096}, std::vector<uint8_t>(4096, 17)));
  std::ifstream in(whole, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = dir.file("cut.gz");
  write_bytes(cut, gz.substr(0, gz.size() / 2));
  check_checkpoint_error([&] { data::read_idx(cut); }, "read_idx", cut);
  // A small file that inflates far past what its header declares: refused after the declared
  // 10 values and one byte more, not inflated whole (64 MiB of zeros compress to ~64 KiB).
  const std::string bomb = dir.file("bomb.gz");
  std::string bytes = idx_bytes({10}, iota_bytes(10));
  bytes.append(std::string(64 << 20, '\0'));
  write_gzip(bomb, bytes);
  CHECK_THROWS_WITH_AS(data::read_idx(bomb), doctest::Contains("the file holds more"),
                       CheckpointError);
}

TEST_CASE("read_csv reads features and a label column, with or without a header") {
  TempDir dir("memgrad_data_test");
  const std::string path = dir.file("iris.csv");
  write_bytes(path, "a,b,label\n1,2,0\n3,-4e1,2\r\n\n0, 7.5 ,1\n");
  const data::TensorDataset ds = data::read_csv(path, /*has_header=*/true);
  CHECK_EQ(ds.size(), 3);
  check_values(ds.inputs(), {3, 2}, {1, 2, 3, -40, 0, 7.5}, 0.0);
  CHECK_EQ(ds.targets().to_vector<int64_t>(), std::vector<int64_t>{0, 2, 1});
  CHECK_EQ(ds.targets().dtype(), kInt64);
  const data::TensorDataset first = data::read_csv(path, true, /*label_column=*/0);
  CHECK_EQ(first.targets().to_vector<int64_t>(), std::vector<int64_t>{1, 3, 0});
  check_values(first.inputs(), {3, 2}, {2, 0, -40, 2, 7.5, 1}, 0.0);
  const std::string no_header = dir.file("plain.csv");
  write_bytes(no_header, "5,6,1\n7,8,0\n");
  check_values(data::read_csv(no_header).inputs(), {2, 2}, {5, 6, 7, 8}, 0.0);
}

TEST_CASE("malformed CSV files are CheckpointErrors naming the file, line and column") {
  TempDir dir("memgrad_data_test");
  struct Case {
    std::string name;
    const char* text;
    const char* message;
    const char* entry;  // the line (and column) at fault, "" when the whole file is
  };
  const std::vector<Case> cases{
      {"ragged.csv", "1,2,0\n3,4\n", "line 2 has 2 columns, expected 3", "line 2"},
      {"text.csv", "1,2,0\n3,x,1\n", "line 2 column 2: 'x' is not a number", "line 2 column 2"},
      {"empty-field.csv", "1,,0\n", "line 1 column 2: an empty field", "line 1 column 2"},
      {"blank-field.csv", "1,  ,0\n", "line 1 column 2: an empty field", "line 1 column 2"},
      {"trailing-comma.csv", "1,2,0\n1,2,\n", "line 2 column 3: an empty field", "line 2 column 3"},
      {"trailing.csv", "1,2abc,0\n", "'2abc' is not a number", "line 1 column 2"},
      {"nan-label.csv", "1,2,nan\n", "line 1 column 3: label 'nan' is not a class index",
       "line 1 column 3"},
      {"huge-label.csv", "1,2,1e300\n", "label '1e300' is not a class index", "line 1 column 3"},
      {"fraction-label.csv", "1,2,2.7\n", "label '2.7' is not a class index", "line 1 column 3"},
      {"negative-label.csv", "1,2,-1\n", "label '-1' is not a class index", "line 1 column 3"},
      {"huge-feature.csv", "1,1e300,0\n", "line 1 column 2: '1e300' is not a finite float32",
       "line 1 column 2"},
      {"one-column.csv", "1\n2\n", "outside the 1 columns of line 1 (at least 2 needed)",
       "column -1"},
      {"header-only.csv", "a,b,c\n", "holds no rows", ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string path = dir.file(c.name);
    write_bytes(path, c.text);
    const bool header = c.name == "header-only.csv";
    check_checkpoint_error([&] { data::read_csv(path, header); }, "read_csv", path, c.entry);
    CHECK_THROWS_WITH_AS(data::read_csv(path, header), doctest::Contains(c.message),
                         CheckpointError);
  }
  const std::string nul = dir.file("nul.csv");
  write_bytes(nul, std::string("1,2,0\n1,\0,0\n", 12));
  check_checkpoint_error([&] { data::read_csv(nul); }, "read_csv", nul, "line 2 column 2");
  const std::string ok = dir.file("ok.csv");
  write_bytes(ok, "1,2,0\n");
  check_checkpoint_error([&] { data::read_csv(ok, false, 3); }, "read_csv", ok, "column 3");
  CHECK_THROWS_AS(data::read_csv(ok, false, -4), CheckpointError);
  // INT_MIN counts from the end without overflowing.
  check_checkpoint_error([&] { data::read_csv(ok, false, std::numeric_limits<int>::min()); },
                         "read_csv", ok, "column -2147483648");
  check_checkpoint_error([&] { data::read_csv(dir.file("missing.csv")); }, "read_csv",
                         dir.file("missing.csv"));
}

}  // TEST_SUITE("nn")
