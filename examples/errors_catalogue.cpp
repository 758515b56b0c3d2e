// errors_catalogue: triggers one error of each type memgrad throws and prints its type, its
// message and, for the types that carry them, its fields. docs/errors.md quotes this program's
// output, so the catalogue shows real messages and real field values.
//
//   ./memgrad example errors_catalogue
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "autograd/autograd.h"
#include "base/atomic_file.h"
#include "engine/io/safetensors.h"
#include "interop/error.h"
#include "interop/pickle_opcodes.h"
#include "interop/pickle_reader.h"
#include "interop/py_value.h"
#include "interop/trace_reader.h"
#include "lab/memory_plan.h"
#include "lab/plan_file.h"
#include "lab/trace_replay.h"

using namespace memgrad;

namespace {

// An optional index field as the catalogue prints it: its value, or "-" when it does not apply.
std::string field(std::optional<int64_t> value) { return value ? fmt::format("{}", *value) : "-"; }

// A ShapeError's shape in one role as the catalogue prints it: the shape, or "-".
std::string role(const std::optional<Shape>& shape) { return shape ? to_string(*shape) : "-"; }

// The fields of `e` in one line, or "" for a type that carries none.
std::string fields_of(const Error& e) {
  if (const auto* s = dynamic_cast<const ShapeError*>(&e)) {
    return fmt::format("op \"{}\", lhs {}, rhs {}, expected {}, actual {}", s->op(), role(s->lhs()),
                       role(s->rhs()), role(s->expected()), role(s->actual()));
  }
  if (const auto* d = dynamic_cast<const DeviceError*>(&e)) {
    return fmt::format("op \"{}\", devices {}", d->op(), fmt::join(d->devices(), ", "));
  }
  if (const auto* v = dynamic_cast<const ValueError*>(&e)) {
    return fmt::format("op \"{}\", argument \"{}\", value \"{}\"", v->op(), v->argument(),
                       v->value());
  }
  if (const auto* c = dynamic_cast<const CheckpointError*>(&e)) {
    return fmt::format("op \"{}\", path \"{}\", entry \"{}\"", c->op(), c->path(), c->entry());
  }
  if (const auto* t = dynamic_cast<const TraceError*>(&e)) {
    return fmt::format("place \"{}\", field \"{}\", path \"{}\"", t->place, t->field, t->path);
  }
  if (const auto* d = dynamic_cast<const DTypeError*>(&e)) {
    std::vector<std::string_view> dtypes;
    for (DType dtype : d->dtypes()) dtypes.push_back(dtype_name(dtype));
    return fmt::format("op \"{}\", dtypes {}", d->op(), fmt::join(dtypes, ", "));
  }
  if (const auto* i = dynamic_cast<const IndexError*>(&e)) {
    return fmt::format("op \"{}\", index {}, size {}, dim {}, ndim {}, position {}", i->op(),
                       field(i->index()), field(i->size()), field(i->dim()), field(i->ndim()),
                       field(i->position()));
  }
  if (const auto* v = dynamic_cast<const VersionCounterError*>(&e)) {
    return fmt::format(
        "op \"{}\", saved_version {}, current_version {}, shape {}, dtype {}, "
        "producer \"{}\", producer_output {}",
        v->op(), v->saved_version(), v->current_version(), to_string(v->shape()),
        dtype_name(v->dtype()), v->producer(), v->producer_output());
  }
  if (const auto* o = dynamic_cast<const OutOfMemoryError*>(&e)) {
    const OutOfMemoryInfo& info = o->info();
    return fmt::format(
        "device \"{}\", requested {}, alloc_size {}, capacity {}, free {}, "
        "allocated {}, reserved {}",
        info.device, info.requested, info.alloc_size, info.capacity, info.free, info.allocated,
        info.reserved);
  }
  if (const auto* c = dynamic_cast<const ConfigError*>(&e)) {
    return fmt::format("key \"{}\", value \"{}\"", c->key, c->value);
  }
  if (const auto* io = dynamic_cast<const IoError*>(&e)) {
    return fmt::format("path \"{}\", error_number {}", io->path, io->error_number);
  }
  if (const auto* plan = dynamic_cast<const PlanError*>(&e)) {
    return fmt::format("path \"{}\", field \"{}\"", plan->path, plan->field);
  }
  if (const auto* p = dynamic_cast<const PickleError*>(&e)) {
    const std::string_view name =
        p->opcode < 0 ? std::string_view("-") : pickle_opcode_name(static_cast<uint8_t>(p->opcode));
    return fmt::format("offset {}, opcode {} ({})", p->offset, p->opcode, name);
  }
  if (const auto* v = dynamic_cast<const PyValueError*>(&e)) {
    return fmt::format("expected \"{}\", found \"{}\"", v->expected, v->found);
  }
  return "";
}

// Runs `trigger`, which must throw, and prints the exception's type, message and fields.
void show(const char* type, const char* what, const std::function<void()>& trigger) {
  try {
    trigger();
    fmt::print("{}: {}\n  (no error was raised)\n\n", type, what);
  } catch (const Error& e) {
    fmt::print("{} -- {}\n  {}\n", type, what, e.what());
    const std::string fields = fields_of(e);
    if (!fields.empty()) fmt::print("  fields: {}\n", fields);
    fmt::print("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Print one real message of each memgrad error type."};
  bool describe = false;
  app.add_flag("--describe", describe, "Print a one-line description and exit");
  CLI11_PARSE(app, argc, argv);
  if (describe) {
    fmt::print("one real message of each error type (quoted by docs/errors.md)\n");
    return 0;
  }
  show("ShapeError", "shapes that do not broadcast", [] { (void)(ones({2, 3}) + ones({4})); });
  show("ShapeError", "a view the strides cannot express", [] {
    (void)ones({4, 6}).t().view({24});
  });
  show("ShapeError", "matrix product of mismatched shapes", [] {
    (void)mm(ones({2, 3}), ones({4, 5}));
  });
  show("ShapeError", "sizes whose element count overflows int64", [] {
    (void)empty({int64_t{1} << 40, int64_t{1} << 40});
  });
  show("IndexError", "a dimension out of range", [] { (void)ones({2, 3}).sum({2}); });
  show("IndexError", "an index out of range", [] {
    (void)ones({5, 2}).index_select(0, tensor({7}));
  });
  show("DTypeError", "a float result written into an int64 tensor", [] {
    Tensor i = tensor({1, 2});
    i.add_(0.5);
  });
  show("DeviceError", "tensors on different devices",
       [] { (void)(ones({2}) + ones({2}, Device("sim:0"))); });
  show("DeviceError", "a CUDA tensor in a build or machine without one",
       [] { (void)ones({2}, Device("cuda:0")); });
  show("ValueError", "an invalid argument value", [] { (void)arange(0, 10, 0); });
  show("ValueError", "a value an int64 tensor cannot hold",
       [] { (void)full({2}, 1e30, TensorOptions(kInt64)); });
  show("ConfigError", "a typo in MEMGRAD_ALLOC_CONF",
       [] { (void)AllocatorConfig::parse("max_split_size:128"); });
  show("OutOfMemoryError", "a request the device cannot hold", [] {
    BoundedMemory device(64 * kMiB, "sim:7");
    CachingAllocator allocator(device);
    Block a = allocator.allocate(40 * kMiB);
    try {
      (void)allocator.allocate(30 * kMiB);
    } catch (...) {
      allocator.free(a);
      throw;
    }
  });
  show("VersionCounterError", "a saved tensor modified in place", [] {
    Tensor x = ones({3}, TensorOptions().with_requires_grad());
    Tensor y = x.exp();
    y.add_(1.0);
    y.sum().backward();
  });
  show("AutogradError", "in-place on a leaf that requires grad", [] {
    Tensor x = ones({3}, TensorOptions().with_requires_grad());
    x.mul_(2.0);
  });
  show("AutogradError", "backward through freed buffers", [] {
    Tensor x = ones({3}, TensorOptions().with_requires_grad());
    Tensor y = x.exp().sum();
    y.backward();
    y.backward();
  });
  show("IoError", "a file that cannot be written",
       [] { write_file_atomically("/proc/memgrad/trace.json", "{}"); });
  show("TraceError", "a trace with a negative request", [] {
    (void)parse_trace(R"({"contexts": [{"phase": "", "op": "", "label": ""}],
                                  "memgrad_events": [{"action": "alloc", "t_ns": 0, "addr": 0,
                                  "size": 512, "requested": -1, "stream": 0, "allocated": 512,
                                  "reserved": 2097152, "ctx": 0}]})");
  });
  show("PlanError", "a plan that would hand out overlapping blocks", [] {
    (void)plan_from_json(R"({"memgrad_plan": 1, "steps_recorded": 1, "planned_step": 0,
                                     "arena_nbytes": 1024, "ideal_nbytes": 1024, "requests": [
                                     {"nbytes": 1024, "free_before": 2, "offsets": [0]},
                                     {"nbytes": 512, "free_before": 2, "offsets": [512]}]})",
                         "step.plan.json");
  });
  show("PickleError", "a pickle that imports a class (what a snapshot never needs)", [] {
    // pickle.dumps(collections.OrderedDict(), protocol=2): GLOBAL, then REDUCE.
    (void)read_pickle(
        std::string_view("\x80\x02"
                         "ccollections\nOrderedDict\nq\x00)Rq\x01.",
                         34));
  });
  show("PickleError", "a truncated pickle",
       [] { (void)read_pickle(std::string_view("\x80\x04}\x94(\x8c\x08segments", 14)); });
  show("PyValueError", "a snapshot field of the wrong type", [] {
    const PyValue block = PyValue::dict({{"size", "512"}});
    (void)block.at("size").as_int();
  });
  show("CheckpointError", "a truncated safetensors file", [] {
    (void)io::decode_safetensors(std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13),
                                 "model.safetensors");
  });
  return 0;
}
