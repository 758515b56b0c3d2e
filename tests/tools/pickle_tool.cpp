// pickle_tool: the C++ side of tests/tools/pickle_check.py, which holds memgrad's pickle codec
// against Python's own pickle module.
//
//   pickle_tool sample PROTOCOL OUT   pickles a sample value (every kind, shared objects, several
//                                     batches and frames) to OUT and prints its JSON
//   pickle_tool json IN               prints the JSON of the pickle IN
//   pickle_tool copy IN PROTOCOL OUT  reads the pickle IN and writes it again with PROTOCOL
//
// Exits 0; 1 with the message of a memgrad::Error; 2 on bad usage. Holds one value in memory.
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "allocator/error.h"
#include "interop/pickle_reader.h"
#include "interop/pickle_writer.h"
#include "interop/py_value.h"
#include "tests/interop/pickle_samples.h"

using namespace memgrad;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path, path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) throw IoError("cannot write " + path, path);
}

// pickle_samples' value plus what a snapshot has at scale: a long list of records sharing
// their frames, a dict of int keys past one batch, and a str past the 64 KiB frame size.
PyValue sample() {
  const PyValue frames =
      PyValue::list({PyValue::dict({{"filename", "model.py"}, {"line", 7}, {"name", "forward"}})});
  PyValue::Items trace;
  for (int i = 0; i < 3000; ++i) {
    trace.push_back(PyValue::dict({{"action", i % 2 ? "free_completed" : "alloc"},
                                   {"addr", int64_t{139637976727552} + 512 * i},
                                   {"size", 512 * (i % 7 + 1)},
                                   {"frames", frames}}));
  }
  PyValue::Entries by_size;
  for (int i = 0; i < 2000; ++i) by_size.emplace_back(i, -0.5 * i);
  return PyValue::dict({{"rich", pickle_samples::rich_value()},
                        {"device_traces", PyValue::list({PyValue::list(std::move(trace))})},
                        {"by_size", PyValue::dict(std::move(by_size))},
                        {"long", std::string(70000, 'z')}});
}

int usage() {
  std::cerr << "usage: pickle_tool sample PROTOCOL OUT | json IN | copy IN PROTOCOL OUT\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "sample" && argc == 4) {
      const PyValue value = sample();
      write_file(argv[3], write_pickle(value, std::stoi(argv[2])));
      std::cout << value.to_json().dump() << "\n";
    } else if (command == "json" && argc == 3) {
      std::cout << read_pickle(read_file(argv[2])).to_json().dump() << "\n";
    } else if (command == "copy" && argc == 5) {
      write_file(argv[4], write_pickle(read_pickle(read_file(argv[2])), std::stoi(argv[3])));
    } else {
      return usage();
    }
  } catch (const Error& e) {
    std::cerr << "pickle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
