// snapshot_tool: memory snapshots written through the engine's PyTorch-named API, for the cases
// no example program makes (tests/tools/snapshot_test.py checks the files).
//
//   snapshot_tool ring MAX_ENTRIES OUT   record_memory_history(sim:0, MAX_ENTRIES), then a
//                                        workload of more allocator events than that (requests
//                                        of many sizes, frees out of order, some blocks kept to
//                                        the end, a last segment obtained among the events the
//                                        ring keeps), then dump_snapshot(OUT, sim:0): a snapshot
//                                        whose ring buffer overflowed. Prints how many events the
//                                        ring kept and whether it overflowed.
//
// Exits 0; 1 with the message of a memgrad::Error; 2 on bad usage.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/error.h"
#include "engine/memory.h"
#include "engine/memory_snapshot.h"

using namespace memgrad;

namespace {

int ring(size_t max_entries, const std::string& out) {
  const Device device(DeviceType::Sim, 0);
  PolicyAllocator& allocator = allocator_for(device);
  const Block before = allocator.allocate(7000);  // live from before the history began
  record_memory_history(device, max_entries);
  std::vector<Block> live;
  for (size_t i = 0; i < 120; ++i) {
    // Small and large requests (both pools, several segments), a quarter of them freed late.
    const size_t nbytes = i % 5 == 0 ? (1 + i % 7) * kMiB + 100 * i : 512 * (1 + i % 13) + i;
    live.push_back(allocator.allocate(nbytes));
    if (live.size() > 6) {
      allocator.free(live[live.size() - 4]);
      live.erase(live.end() - 4);
    }
  }
  live.push_back(allocator.allocate(30 * kMiB));  // a segment of its own, within the ring
  for (size_t k = 0; k < live.size(); k += 2) allocator.free(live[k]);
  const size_t events = allocator.trace().size();
  dump_snapshot(out, device);
  fmt::print("ring of {} entries: {} events kept, the ring overflowed: {}\n", max_entries, events,
             allocator.trace().overflowed() ? "yes" : "no");
  (void)before;  // still live when the snapshot is taken
  return 0;
}

int usage() {
  std::fprintf(stderr, "usage: snapshot_tool ring MAX_ENTRIES OUT\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() != 3 || args[0] != "ring") return usage();
  size_t max_entries = 0;
  try {
    max_entries = std::stoul(args[1]);
  } catch (const std::exception&) {
    return usage();
  }
  if (max_entries == 0) return usage();
  try {
    return ring(max_entries, args[2]);
  } catch (const Error& e) {
    std::fprintf(stderr, "snapshot_tool: error: %s\n", e.what());
    return 1;
  }
}
