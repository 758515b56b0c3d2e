// B5 -- views share storage; clone copies (seeds 001 §6 and FAQ).
//
// Each view op (view, reshape of a contiguous tensor, slice, transpose, expand, ...) is applied
// to a tensor and the device allocator's allocated bytes are read before and after: a view
// adds 0 bytes and shares the storage; clone adds exactly the tensor's bytes, rounded up to the
// allocator's 512-byte blocks; contiguous() copies only when the input is not contiguous.
//
//   ./memgrad example b05 [--size N] [--device sim:0]
#include "examples/behaviours/b05_views_share_storage.h"

#include <functional>

#include <fmt/format.h>

#include "engine/memgrad.h"
#include "examples/behaviours/behaviour.h"
#include "examples/common/report.h"

namespace memgrad::examples {

std::vector<ViewRow> measure_views(int64_t size, Device device) {
  const int64_t n = 64 * size;
  const Tensor x = arange(n * 64, TensorOptions(kFloat32).with_device(device)).view({n, 64});
  const int64_t full = rounded(n * 64 * 4);
  const Tensor xt = x.t();  // a non-contiguous view to copy from
  struct Op {
    std::string name;
    int64_t expected;
    std::function<Tensor()> run;
  };
  const std::vector<Op> ops = {
      {fmt::format("x.view({{{}, 32}})", n * 2), 0,
       [&] {
         return x.view({n * 2, 32});
       }},
      {"x.reshape({-1}) (contiguous x)", 0, [&] { return x.reshape({-1}); }},
      {"x.slice(1, 0, 64, 2)", 0, [&] { return x.slice(1, 0, 64, 2); }},
      {"x[3]", 0, [&] { return x[3]; }},
      {"x.t()", 0, [&] { return x.t(); }},
      {fmt::format("x[0].expand({{{}, 64}})", n), 0,
       [&] {
         return x[0].expand({n, 64});
       }},
      {"x.unsqueeze(0)", 0, [&] { return x.unsqueeze(0); }},
      {"x.contiguous() (already contiguous)", 0, [&] { return x.contiguous(); }},
      {"x.clone()", full, [&] { return x.clone(); }},
      {"x.t().contiguous()", full, [&] { return xt.contiguous(); }},
      {"x.t().reshape({-1}) (must copy)", full, [&] { return xt.reshape({-1}); }},
  };
  std::vector<ViewRow> rows;
  for (const Op& op : ops) {
    const int64_t before = static_cast<int64_t>(memory_allocated(device));
    const Tensor r = op.run();
    const int64_t measured = static_cast<int64_t>(memory_allocated(device)) - before;
    rows.push_back({op.name, op.expected, measured, r.shares_storage_with(x),
                    static_cast<char*>(r.data_ptr()) - static_cast<char*>(x.data_ptr())});
  }
  return rows;
}

}  // namespace memgrad::examples

// ---- the program ----

namespace {

using namespace memgrad;
using namespace memgrad::examples;

const BehaviourInfo kInfo = {
    "B5", "views share storage; clone copies", "seeds 001 (section 6 and FAQ)",
    "view() allocates no memory and shares storage with its input; clone() makes a new copy."};

int body(const BehaviourFlags& flags) {
  const Device device(flags.device);
  const std::vector<ViewRow> rows = measure_views(flags.size, device);
  MemoryReport report(fmt::format(
      "Bytes allocated by each op on a float32 ({}, 64) tensor x on {}:", 64 * flags.size,
      device.str()));
  for (const ViewRow& r : rows) {
    report.add(
        fmt::format("{:<38} shares x's storage: {:<3}", r.op, r.shares_storage ? "yes" : "no"),
        r.expected, r.measured);
  }
  report.print();
  fmt::print(
      "\ndata pointers relative to x.data_ptr(): slice(1, 0, 64, 2) {:+} B, x[3] {:+} B, "
      "x.t() {:+} B\n",
      rows[2].data_offset, rows[3].data_offset, rows[4].data_offset);
  int views = 0, zero = 0;
  for (const ViewRow& r : rows) {
    if (r.expected == 0) {
      ++views;
      zero += r.measured == 0 && r.shares_storage ? 1 : 0;
    }
  }
  print_conclusion(fmt::format(
      "{} of {} view ops allocated 0 bytes and share x's storage; every copy allocated exactly "
      "{} bytes ({} elements x 4, rounded to 512).",
      zero, views, rows[8].measured, 64 * flags.size * 64));
  return report.all_match() ? 0 : 2;
}

}  // namespace

namespace memgrad::examples {

// The program: b05_views_share_storage_main() is its main() (a generated file calls it).
int b05_views_share_storage_main(int argc, char** argv) {
  return run_behaviour(argc, argv, kInfo, body);
}

}  // namespace memgrad::examples
