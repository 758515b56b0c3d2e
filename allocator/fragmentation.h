// Fragmentation, explained: where the bytes an allocator reserved but did not hand out are, and
// the largest request it could serve now.
//
// reserved - allocated = hard + soft + stream, exactly:
//   hard    free bytes in a segment that also holds a live block: fenced by it, they can serve
//           only requests that fit between the live blocks, and empty_cache() cannot return them;
//   soft    free bytes in segments that hold no live block: scattered over whole free segments,
//           which the allocator (or empty_cache()) can return to the device and obtain again as
//           one larger segment;
//   stream  free bytes in segments of another stream than the one asked about, and blocks freed
//           but waiting on other streams' work (record_stream): unusable by this stream now.
// rounding = allocated - requested: bytes handed out beyond what callers asked for (512-byte
// rounding, power-of-two classes, whole pages), lost inside live blocks.
//
// These are the terms of a 2026 study of HBM fragmentation (hard, soft and stream), which
// PyTorch users have asked for at OOM time since 2019 (pytorch/pytorch#29554).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/stream.h"

namespace memgrad {

struct FragmentationReport {
  size_t reserved = 0;            // bytes held from the source
  size_t allocated = 0;           // bytes in live blocks
  size_t requested = 0;           // what the callers of the live blocks asked for
  size_t hard = 0;                // free bytes fenced by live blocks in their segment
  size_t soft = 0;                // free bytes in segments with no live block
  size_t stream = 0;              // free bytes of other streams, and blocks pending on them
  size_t rounding = 0;            // allocated - requested
  size_t largest_free_block = 0;  // the largest free block of the stream asked about
  // The largest request that would succeed now: served from a free block, or from the source
  // (its free bytes under the allocator's limit, plus the soft bytes the allocator would return
  // to it before retrying) given the segment size the policy obtains for a request.
  size_t largest_request = 0;
};

// The report of `segments` (a policy's snapshot, whose blocks tile each segment) for requests on
// `stream`. `source_budget`: what the source could still give the allocator (its free bytes,
// within the allocator's limit). `segment_for(n)`: the bytes the policy obtains from the source
// for a request of n bytes (nondecreasing in n). Allocates: host memory only, none kept.
FragmentationReport fragmentation_of(const std::vector<SegmentSnapshot>& segments, StreamId stream,
                                     size_t source_budget,
                                     const std::function<size_t(size_t)>& segment_for);

// "of the 40.00 MiB reserved but unallocated, 40.00 MiB is fenced by live blocks (hard), 0 bytes
// lies in free segments (soft), 0 bytes belongs to other streams; the largest free block is
// 40.00 MiB and the largest request that would succeed now 40.00 MiB"
std::string fragmentation_sentence(const FragmentationReport& report);

}  // namespace memgrad
