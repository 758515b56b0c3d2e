// Transport: what a ProcessGroup asks of a collective engine (Gloo or NCCL), on raw buffers.
//
// The ProcessGroup checks its arguments, exchanges the call descriptions, allocates staging from
// the device's allocator and turns failures into typed errors; a Transport only moves bytes, as
// the kernels layer only computes. A transport throws TransportFailure when its engine reports an
// error; the ProcessGroup then finds out which peers are gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace memgrad::distributed::detail {

// An engine error (Gloo's IoException, an NCCL error code), with the engine's message.
struct TransportFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a rank's process runs, published in the store at rendezvous, so a failed collective can
// tell which peers have exited.
struct PeerInfo {
  std::string host;
  int64_t pid = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Every rank's `mine` (same length everywhere), concatenated in rank order.
  virtual std::vector<int64_t> exchange(const std::vector<int64_t>& mine) = 0;
  // `count` elements of `dtype` at `data`, summed over ranks in place.
  virtual void all_reduce_sum(void* data, size_t count, DType dtype) = 0;
  // Every rank's `in_bytes` (at `in`, or already at out + rank x in_bytes when in is null) into
  // `out` in rank order.
  virtual void all_gather(void* out, const void* in, size_t in_bytes) = 0;
  // `in` holds N pieces of `piece_bytes`; piece r goes to rank r, which stores the pieces it
  // receives in rank order in `out` (N x piece_bytes).
  virtual void all_to_all(void* out, const void* in, size_t piece_bytes) = 0;
  // Whether the engine reduce-scatters itself (NCCL); otherwise the group uses all_to_all.
  virtual bool has_reduce_scatter() const { return false; }
  // `count` x N elements at `in`, summed over ranks; this rank's `count` into `out`.
  virtual void reduce_scatter_sum(void* out, const void* in, size_t count, DType dtype);
  virtual void broadcast(void* data, size_t nbytes, int root) = 0;
  virtual void barrier() = 0;

  // A group of one without an engine: every collective is the identity or a local copy, so
  // the process group skips the transport (and the call check).
  virtual bool local() const { return false; }

  // See ProcessGroup::wire_bytes_sent.
  virtual std::optional<uint64_t> wire_bytes_sent() const { return std::nullopt; }
  // Where each rank runs, indexed by rank (empty when unknown).
  virtual const std::vector<PeerInfo>& peers() const = 0;
};

}  // namespace memgrad::distributed::detail
