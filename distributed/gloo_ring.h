// GlooRing: all_reduce, all_gather and all_to_all over Gloo's TCP pairs in synchronous mode,
// where the calling thread reads its own socket.
//
// Gloo's collectives run in its asynchronous mode: a device thread waits on epoll, reads what
// arrives into the destination and wakes the calling thread through a condition variable, so a
// message costs two wake-ups. A wake-up is dear where an idle core halts (a virtual machine
// without halt polling: the vCPU must be scheduled again), and a training step leaves the
// cores idle exactly there, between its computation and the next. Here the thread blocked in
// recv(2) is the one the kernel wakes. On a 2-vCPU machine this took DDP's MLP step (blocking, one
// bucket) from 10.4 to 6.5 ms (docs/performance.md, "Data parallelism").
//
// The algorithms are the bandwidth-optimal rings: all_reduce is a reduce-scatter then an
// all-gather, each of N - 1 steps in which every rank sends one of N chunks to the next rank and
// receives one from the previous (2 (N - 1) / N x nbytes sent per rank, as Gloo's ring);
// all_gather is the second half alone; all_to_all is N - 1 rounds in which rank r sends to r + s
// and receives from r - s. Every step moves its chunk in the same number of pieces on every
// rank, and each rank writes piece i, then reads piece i. That cannot deadlock although writes
// block: before writing, Gloo sets the connection's send buffer to the message's size, which the
// kernel doubles (up to 2 x net.core.wmem_max, 416 KiB by default), so a connection takes one
// whole piece without its reader; if every rank were blocked writing, every link would hold more
// than one unread piece, yet a rank writes at most one piece ahead of what it has read, so the
// unread pieces on the N links add up to at most N. Pieces are at most kPieceBytes (under
// wmem_max's default with Gloo's header), the same on every rank, since the ranks must cut them
// alike.
//
// Not thread-safe: one collective at a time (the ProcessGroup's calls are serialized). Gloo's
// exceptions (IoException on a closed connection, a read or write past the timeout) pass
// through to the caller.
#pragma once

#include <cstddef>
#include <memory>

#include <gloo/context.h>

namespace memgrad::distributed::detail {

class GlooRing {
 public:
  // c[i] = a[i] + b[i] for `n` elements.
  using ReduceFn = void (*)(void*, const void*, const void*, size_t);

  // Switches every pair of `context` (connected, and used by nothing else) to synchronous mode.
  explicit GlooRing(std::shared_ptr<gloo::Context> context);

  // `count` elements of `element_bytes` at `data`, summed over the ranks in place with `sum`.
  void all_reduce(void* data, size_t count, size_t element_bytes, ReduceFn sum);
  // Each rank's `block_bytes`, already at out + rank x block_bytes, into every rank's `out`.
  void all_gather(void* out, size_t block_bytes);
  // `in` holds N pieces of `piece_bytes`; piece r goes to rank r, which stores what it receives
  // in rank order in `out`.
  void all_to_all(void* out, const void* in, size_t piece_bytes);

 private:
  static constexpr size_t kPieceBytes = size_t{200} << 10;

  // One step of a ring or a round of all_to_all, in `pieces` pieces each way, cut on `unit`
  // bytes (an element): send `send_count` units at byte `send_offset` of `send` (a buffer on
  // the pair to the receiving peer) to byte `remote_offset` of that peer's receive buffer, and
  // receive `recv_count` units through `recv` (a buffer on the pair to the sending peer).
  // `received(offset, bytes)` runs on each piece received, its offset counted in bytes from the
  // start of the step's receive.
  template <typename OnPiece>
  void step(gloo::transport::Buffer& send, size_t send_offset, size_t send_count,
            size_t remote_offset, gloo::transport::Buffer& recv, size_t recv_count, size_t unit,
            size_t pieces, OnPiece&& received);

  int next_slot() { return slot_++ & 0x3fffffff; }

  std::shared_ptr<gloo::Context> context_;
  int rank_;
  int size_;
  int slot_ = 1;
};

}  // namespace memgrad::distributed::detail
