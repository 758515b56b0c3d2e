// memory_summary(): the statistics as the table torch.cuda.memory_summary() prints.
//
// Same rows, columns, units and rounding as PyTorch (sizes step up from B to KiB, MiB, ... once
// the row's "all" value reaches 768 of the next unit; counts step up at 750 000), so a memgrad
// table and a PyTorch table for the same program can be read side by side. Rows that say "GPU"
// in PyTorch say nothing device-specific here, since memgrad's devices include the CPU.
#pragma once

#include <string>
#include <string_view>

#include "allocator/fragmentation.h"
#include "allocator/stats.h"

namespace memgrad {

// The table for `stats` of device `device` under `policy`. `abbreviated` drops the per-pool rows.
// With `fragmentation`, rows that PyTorch's table lacks follow: where the reserved but
// unallocated bytes are now (hard, soft, other streams; allocator/fragmentation.h), the bytes
// lost to rounding, the largest free block and the largest request that would succeed now.
std::string memory_summary(const MemoryStats& stats, std::string_view device,
                           std::string_view policy, bool abbreviated = false,
                           const FragmentationReport* fragmentation = nullptr);

}  // namespace memgrad
