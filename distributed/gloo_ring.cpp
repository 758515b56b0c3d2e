// GlooRing: see gloo_ring.h for why the calling thread reads its own sockets, and why the
// pieces cannot deadlock.
#include "distributed/gloo_ring.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

namespace memgrad::distributed::detail {
namespace {

// [begin, end) of part `i` of `n` of the range [0, total): parts differ by at most one.
std::pair<size_t, size_t> part(size_t total, size_t n, size_t i) {
  return {total * i / n, total * (i + 1) / n};
}

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

GlooRing::GlooRing(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)), rank_(context_->rank), size_(context_->size) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) context_->getPair(peer)->setSync(true, /*busyPoll=*/false);
  }
}

template <typename OnPiece>
void GlooRing::step(gloo::transport::Buffer& send, size_t send_offset, size_t send_count,
                    size_t remote_offset, gloo::transport::Buffer& recv, size_t recv_count,
                    size_t unit, size_t pieces, OnPiece&& received) {
  for (size_t i = 0; i < pieces; ++i) {
    const auto [out_begin, out_end] = part(send_count, pieces, i);
    send.send(send_offset + out_begin * unit, (out_end - out_begin) * unit,
              remote_offset + out_begin * unit);
    send.waitSend();  // written in full already: a blocking write
    recv.waitRecv();  // the peer's piece i: pieces on a connection arrive in order
    const auto [in_begin, in_end] = part(recv_count, pieces, i);
    received(in_begin * unit, (in_end - in_begin) * unit);
  }
}

void GlooRing::all_reduce(void* data, size_t count, size_t element_bytes, ReduceFn sum) {
  if (size_ == 1 || count == 0) return;
  auto* bytes = static_cast<char*>(data);
  const auto n = static_cast<size_t>(size_);
  const auto r = static_cast<size_t>(rank_);
  auto& next = context_->getPair((rank_ + 1) % size_);
  auto& prev = context_->getPair((rank_ + size_ - 1) % size_);
  // Chunk c is elements part(count, N, c); a step moves one chunk, in `pieces` pieces on every
  // rank (cut from the largest chunk's size, so that the counts agree).
  auto chunk = [&](size_t c) { return part(count, n, c % n); };
  const size_t pieces =
      std::max<size_t>(1, ceil_div(ceil_div(count, n) * element_bytes, kPieceBytes));
  // Each reduce-scatter step receives its chunk here; left uninitialized, as every byte read was
  // received first.
  const size_t scratch_bytes = ceil_div(count, n) * element_bytes;
  const auto scratch = std::make_unique_for_overwrite<char[]>(scratch_bytes);
  const int scatter_slot = next_slot(), gather_slot = next_slot();
  auto scatter_send = next->createSendBuffer(scatter_slot, bytes, count * element_bytes);
  auto scatter_recv = prev->createRecvBuffer(scatter_slot, scratch.get(), scratch_bytes);
  auto gather_send = next->createSendBuffer(gather_slot, bytes, count * element_bytes);
  auto gather_recv = prev->createRecvBuffer(gather_slot, bytes, count * element_bytes);
  // Reduce-scatter: at step s, send chunk r - s (summed over s + 1 ranks so far) and add the
  // previous rank's chunk r - s - 1 into this one's; after N - 1 steps chunk r + 1 is complete.
  for (size_t s = 0; s + 1 < n; ++s) {
    const auto [out_begin, out_end] = chunk(r + n - s);
    const auto [in_begin, in_end] = chunk(r + n - s - 1);
    step(*scatter_send, out_begin * element_bytes, out_end - out_begin, 0, *scatter_recv,
         in_end - in_begin, element_bytes, pieces, [&](size_t offset, size_t piece) {
           char* into = bytes + in_begin * element_bytes + offset;
           sum(into, into, scratch.get() + offset, piece / element_bytes);
         });
  }
  // All-gather: at step s, pass on chunk r + 1 - s (complete) and receive chunk r - s in place.
  for (size_t s = 0; s + 1 < n; ++s) {
    const auto [out_begin, out_end] = chunk(r + 1 + n - s);
    const auto [in_begin, in_end] = chunk(r + n - s);
    step(*gather_send, out_begin * element_bytes, out_end - out_begin, out_begin * element_bytes,
         *gather_recv, in_end - in_begin, element_bytes, pieces, [](size_t, size_t) {});
  }
}

void GlooRing::all_gather(void* out, size_t block_bytes) {
  if (size_ == 1 || block_bytes == 0) return;
  auto* bytes = static_cast<char*>(out);
  const auto n = static_cast<size_t>(size_);
  const auto r = static_cast<size_t>(rank_);
  const size_t total = block_bytes * n;
  const size_t pieces = ceil_div(block_bytes, kPieceBytes);
  const int slot = next_slot();
  auto send = context_->getPair((rank_ + 1) % size_)->createSendBuffer(slot, bytes, total);
  auto recv = context_->getPair((rank_ + size_ - 1) % size_)->createRecvBuffer(slot, bytes, total);
  // At step s, pass on block r - s and receive block r - s - 1.
  for (size_t s = 0; s + 1 < n; ++s) {
    const size_t out_block = (r + n - s) % n;
    step(*send, out_block * block_bytes, block_bytes, out_block * block_bytes, *recv, block_bytes,
         1, pieces, [](size_t, size_t) {});
  }
}

void GlooRing::all_to_all(void* out, const void* in, size_t piece_bytes) {
  if (piece_bytes == 0) return;
  auto* into = static_cast<char*>(out);
  // Gloo's buffers take a non-const pointer; nothing is written through a send buffer.
  auto* from = static_cast<char*>(const_cast<void*>(in));
  const auto n = static_cast<size_t>(size_);
  const auto r = static_cast<size_t>(rank_);
  std::memcpy(into + r * piece_bytes, from + r * piece_bytes, piece_bytes);
  const size_t pieces = ceil_div(piece_bytes, kPieceBytes);
  // Round s: send piece r + s to rank r + s and receive rank r - s's piece for this one.
  for (size_t s = 1; s < n; ++s) {
    const size_t to = (r + s) % n, source = (r + n - s) % n;
    const int slot = next_slot();
    auto send =
        context_->getPair(static_cast<int>(to))->createSendBuffer(slot, from, piece_bytes * n);
    auto recv =
        context_->getPair(static_cast<int>(source))->createRecvBuffer(slot, into, piece_bytes * n);
    step(*send, to * piece_bytes, piece_bytes, r * piece_bytes, *recv, piece_bytes, 1, pieces,
         [](size_t, size_t) {});
  }
}

}  // namespace memgrad::distributed::detail
