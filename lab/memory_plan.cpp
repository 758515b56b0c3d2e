// Memory plans: lifetimes from a recorded step, a dry run of the other steps, greedy by size,
// and the safety check.
#include "lab/memory_plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "interop/trace_reader.h"

namespace memgrad {
namespace {

// Sums of sizes that may pass 2^64 (GCC's 128-bit integer; __extension__: not ISO C++).
__extension__ using Wide = __int128;

constexpr size_t kGranule = 512;  // every block is a multiple of it (kMinBlockSize)
constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 60;  // the request guard of Allocator
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

size_t granules(size_t nbytes) { return (nbytes + kGranule - 1) / kGranule * kGranule; }

// ---- lifetimes of the planned step ----

// The planned step's requests in allocation order with their free_before, and its ids.
struct StepLifetimes {
  std::vector<PlannedRequest> requests;
  std::vector<uint64_t> tags;                       // per request: where it was made
  std::unordered_map<uint64_t, uint32_t> index_of;  // id -> request index
};

StepLifetimes lifetimes_of(const RecordedStep& step) {
  StepLifetimes out;
  for (const StepEvent& e : step) {
    if (e.alloc) {
      const auto index = static_cast<uint32_t>(out.requests.size());
      out.index_of[e.id] = index;
      PlannedRequest r;
      r.nbytes = granules(e.nbytes);
      out.requests.push_back(std::move(r));
      out.tags.push_back(e.tag);
    } else if (auto it = out.index_of.find(e.id); it != out.index_of.end()) {
      // Freed before the next allocation, whose index is the count so far.
      out.requests[it->second].free_before = static_cast<uint32_t>(out.requests.size());
    }
  }
  return out;
}

// ---- the dry run: the other steps matched against the planned one ----

// Matches one step's allocations to plan indices as the planned policy does: the request at the
// cursor when its size matches, else the next one of that size within kPlanLookahead; nothing
// when none is. `skip_one_time` skips the requests a first step makes alone.
std::vector<std::optional<uint32_t>> match_step(const RecordedStep& step,
                                                const std::vector<PlannedRequest>& plan,
                                                bool skip_one_time) {
  std::vector<std::optional<uint32_t>> matched;
  size_t cursor = 0;
  for (const StepEvent& e : step) {
    if (!e.alloc) continue;
    const size_t nbytes = granules(e.nbytes);
    std::optional<uint32_t> hit;
    size_t seen = 0;
    for (size_t k = cursor; k < plan.size() && seen < kPlanLookahead; ++k) {
      if (skip_one_time && plan[k].one_time) continue;
      ++seen;
      if (plan[k].nbytes == nbytes) {
        hit = static_cast<uint32_t>(k);
        cursor = k + 1;
        break;
      }
    }
    matched.push_back(hit);
  }
  return matched;
}

// Aligns one later step's allocations to the plan's requests: the longest common subsequence of
// (size, tag) keys. Among alignments of that length the traceback, which walks back from both
// ends, takes the latest plan request: a first step's extra requests (optimizer state) then stay
// unmatched rather than taking the place of a same-sized request after them. Steps too large for
// the table are matched greedily on the same keys. O(requests x allocations) time and space.
std::vector<std::optional<uint32_t>> align_step(const RecordedStep& step,
                                                const std::vector<PlannedRequest>& plan,
                                                const std::vector<uint64_t>& tags) {
  std::vector<std::pair<size_t, uint64_t>> keys;  // the step's allocations
  for (const StepEvent& e : step) {
    if (e.alloc) keys.emplace_back(granules(e.nbytes), e.tag);
  }
  const size_t n = plan.size(), m = keys.size();
  const auto same = [&](size_t k, size_t a) {
    return plan[k].nbytes == keys[a].first && tags[k] == keys[a].second;
  };
  std::vector<std::optional<uint32_t>> matched(m);
  if (n >= UINT16_MAX || m >= UINT16_MAX || (n + 1) * (m + 1) > kMaxAlignCells) {
    size_t cursor = 0;
    for (size_t a = 0; a < m; ++a) {
      for (size_t k = cursor, seen = 0; k < n && seen < kPlanLookahead; ++k, ++seen) {
        if (same(k, a)) {
          matched[a] = static_cast<uint32_t>(k);
          cursor = k + 1;
          break;
        }
      }
    }
    return matched;
  }
  // lcs[k][a]: the longest common subsequence of plan[0, k) and keys[0, a).
  std::vector<uint16_t> lcs((n + 1) * (m + 1), 0);
  const auto at = [&](size_t k, size_t a) -> uint16_t& { return lcs[k * (m + 1) + a]; };
  for (size_t k = 1; k <= n; ++k) {
    for (size_t a = 1; a <= m; ++a) {
      at(k, a) = same(k - 1, a - 1) ? static_cast<uint16_t>(at(k - 1, a - 1) + 1)
                                    : std::max(at(k - 1, a), at(k, a - 1));
    }
  }
  for (size_t k = n, a = m; k > 0 && a > 0;) {
    if (same(k - 1, a - 1) && at(k, a) == at(k - 1, a - 1) + 1) {
      matched[a - 1] = static_cast<uint32_t>(k - 1);
      --k;
      --a;
    } else if (at(k, a) == at(k - 1, a)) {
      --k;
    } else {
      --a;
    }
  }
  return matched;
}

// The most intervals [begin, end) of `spans` that overlap at one time.
uint32_t max_overlap(std::vector<std::pair<uint64_t, uint64_t>> spans) {
  std::vector<std::pair<uint64_t, int>> edges;
  for (const auto& [begin, end] : spans) {
    edges.emplace_back(begin, +1);
    edges.emplace_back(end, -1);
  }
  std::sort(edges.begin(), edges.end());  // at equal times the end (-1) comes first
  int live = 0, most = 0;
  for (const auto& [time, delta] : edges) {
    live += delta;
    most = std::max(most, live);
  }
  return static_cast<uint32_t>(most);
}

// Sets one_time (outliving requests no later step repeats) and the number of copies of each
// outliving request (its instances live at once over the whole recording, capped).
void dry_run(const std::vector<RecordedStep>& steps, size_t plan_step,
             std::vector<PlannedRequest>& plan, const std::vector<uint64_t>& tags,
             std::vector<uint32_t>& copies) {
  std::vector<bool> repeated(plan.size(), false);
  for (size_t t = plan_step + 1; t < steps.size(); ++t) {
    const auto matched = align_step(steps[t], plan, tags);
    for (const auto& k : matched) {
      if (k) repeated[*k] = true;
    }
  }
  const bool later_steps = plan_step + 1 < steps.size();
  for (size_t k = 0; k < plan.size(); ++k) {
    plan[k].one_time = later_steps && plan[k].outlives() && !repeated[k];
  }
  // Instances of each outliving request over the recording's global event time.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> spans(plan.size());
  std::unordered_map<uint64_t, std::pair<uint32_t, size_t>> open;  // id -> (request, span)
  uint64_t time = 0;
  for (size_t t = 0; t < steps.size(); ++t) {
    const auto matched = match_step(steps[t], plan, t > plan_step);
    size_t alloc = 0;
    for (const StepEvent& e : steps[t]) {
      ++time;
      if (e.alloc) {
        const std::optional<uint32_t> k = matched[alloc++];
        if (k && plan[*k].outlives()) {
          spans[*k].emplace_back(time, kNever);
          open[e.id] = {*k, spans[*k].size() - 1};
        }
      } else if (auto it = open.find(e.id); it != open.end()) {
        spans[it->second.first][it->second.second].second = time;
        open.erase(it);
      }
    }
  }
  copies.assign(plan.size(), 1);
  for (size_t k = 0; k < plan.size(); ++k) {
    if (!plan[k].outlives()) continue;
    copies[k] = std::clamp<uint32_t>(max_overlap(spans[k]), 1, kMaxPlanCopies);
  }
}

// ---- greedy by size ----

// One block to place: a request (or one copy of it) live over [begin, end) in allocation-index
// time.
struct Item {
  uint32_t request = 0;
  uint32_t copy = 0;
  size_t nbytes = 0;
  uint32_t begin = 0;
  uint32_t end = 0;
  size_t offset = 0;
};

bool intersect(const Item& a, const Item& b) { return a.begin < b.end && b.begin < a.end; }

// TFLite's GreedyBySizeAssignment: items by size, largest first; each goes to the smallest gap
// between the placed items it intersects in time (in offset order) that holds it, or above the
// highest of them. `placed` stays sorted by offset so the gaps are found in one walk.
size_t place_greedy_by_size(std::vector<Item>& items) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (items[a].nbytes != items[b].nbytes) return items[a].nbytes > items[b].nbytes;
    return items[a].begin < items[b].begin;
  });
  std::vector<size_t> placed;  // indices into items, by offset
  size_t arena = 0;
  for (size_t i : order) {
    Item& item = items[i];
    size_t best = 0;
    size_t best_gap = SIZE_MAX;
    size_t prev_end = 0;
    for (size_t j : placed) {
      const Item& other = items[j];
      if (!intersect(item, other)) continue;
      if (other.offset >= prev_end) {
        const size_t gap = other.offset - prev_end;
        if (gap >= item.nbytes && gap < best_gap) {
          best = prev_end;
          best_gap = gap;
        }
      }
      prev_end = std::max(prev_end, other.offset + other.nbytes);
    }
    item.offset = best_gap == SIZE_MAX ? prev_end : best;
    size_t end = 0;
    if (__builtin_add_overflow(item.offset, item.nbytes, &end)) {
      throw PlanError(
          fmt::format("plan: the requests live at once need more than 2^64 bytes "
                      "(request {} of {} B placed at {})",
                      item.request, item.nbytes, item.offset));
    }
    arena = std::max(arena, end);
    const auto at = std::upper_bound(placed.begin(), placed.end(), item.offset,
                                     [&](size_t off, size_t j) { return off < items[j].offset; });
    placed.insert(at, i);
  }
  return arena;
}

// The most bytes live at one allocation index (every item counted over its lifetime), in 128
// bits: requests of up to 2^60 bytes each, any number of them. Beyond size_t: a PlanError.
size_t ideal_of(const std::vector<Item>& items, size_t count) {
  std::vector<Wide> delta(count + 1, 0);
  for (const Item& item : items) {
    delta[item.begin] += item.nbytes;
    delta[item.end] -= item.nbytes;
  }
  Wide live = 0, most = 0;
  for (size_t t = 0; t < count; ++t) {
    live += delta[t];
    most = std::max(most, live);
  }
  if (most > static_cast<Wide>(SIZE_MAX)) {
    throw PlanError("plan: the requests live at once need more than 2^64 bytes");
  }
  return static_cast<size_t>(most);
}

}  // namespace

PlanError PlanError::at(const std::string& path, const std::string& field, const std::string& why) {
  return PlanError(
      fmt::format("plan{}: {}: {}", path.empty() ? "" : fmt::format(" '{}'", path), field, why),
      path, field);
}

uint64_t context_tag(std::string_view phase, std::string_view op) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a, 64 bits
  const auto add = [&](std::string_view text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;
    }
    hash ^= 0xff;  // a separator no text holds, so ("ab", "") and ("a", "b") differ
    hash *= 1099511628211ULL;
  };
  add(phase);
  add(op);
  return hash;
}

MemoryPlan plan_recording(const std::vector<RecordedStep>& steps, size_t plan_step) {
  if (plan_step >= steps.size()) {
    throw PlanError(
        fmt::format("plan: step {} of a recording of {} steps", plan_step, steps.size()));
  }
  StepLifetimes step = lifetimes_of(steps[plan_step]);
  const size_t n = step.requests.size();
  if (n == 0) throw PlanError(fmt::format("plan: step {} has no allocation", plan_step));
  if (n >= PlannedRequest::kOutlives) throw PlanError("plan: more than 2^32 requests in a step");
  std::vector<uint32_t> copies;
  dry_run(steps, plan_step, step.requests, step.tags, copies);
  // An outliving copy is reserved for the whole step: the previous step's instance may still
  // be live at any point of the next one.
  std::vector<Item> items;
  for (uint32_t k = 0; k < n; ++k) {
    const PlannedRequest& r = step.requests[k];
    for (uint32_t c = 0; c < copies[k]; ++c) {
      items.push_back({k, c, r.nbytes, r.outlives() ? 0 : k,
                       r.outlives() ? static_cast<uint32_t>(n) : r.free_before, 0});
    }
  }
  MemoryPlan plan;
  plan.arena_nbytes = place_greedy_by_size(items);
  plan.ideal_nbytes = ideal_of(items, n);
  plan.requests = std::move(step.requests);
  for (const Item& item : items) plan.requests[item.request].offsets.push_back(item.offset);
  plan.steps_recorded = static_cast<uint32_t>(steps.size());
  plan.planned_step = static_cast<uint32_t>(plan_step);
  return plan;
}

std::vector<RecordedStep> steps_of_trace(const RecordedTrace& trace) {
  std::vector<RecordedStep> steps;
  bool has_forward = false;
  for (const TraceEvent& e : trace.events) {
    has_forward = has_forward || (e.action == TraceAction::Alloc &&
                                  trace.contexts.at(e.context).phase == "forward");
  }
  if (!has_forward) steps.emplace_back();       // the whole trace is one step
  std::unordered_map<uint64_t, uint64_t> live;  // address -> id
  uint64_t next_id = 0;
  bool previous_forward = false;
  for (const TraceEvent& e : trace.events) {
    if (e.action == TraceAction::Alloc && e.requested > 0) {
      const bool forward = trace.contexts.at(e.context).phase == "forward";
      if (forward && !previous_forward) steps.emplace_back();
      previous_forward = forward;
      live[e.address] = next_id;
      const TraceContextRecord& c = trace.contexts.at(e.context);
      if (!steps.empty()) {
        steps.back().push_back({true, next_id, e.requested, context_tag(c.phase, c.op)});
      }
      ++next_id;
    } else if (e.action == TraceAction::FreeRequested) {
      auto it = live.find(e.address);
      if (it == live.end()) continue;
      if (!steps.empty()) steps.back().push_back({false, it->second, 0});
      live.erase(it);
    }
  }
  return steps;
}

MemoryPlan plan_trace(const RecordedTrace& trace, std::string source) {
  const std::vector<RecordedStep> steps = steps_of_trace(trace);
  if (steps.empty() ||
      std::none_of(steps[0].begin(), steps[0].end(), [](const StepEvent& e) { return e.alloc; })) {
    throw PlanError(fmt::format("plan: the trace '{}' has no allocation to plan", source), source);
  }
  MemoryPlan plan = plan_recording(steps, 0);
  plan.source = std::move(source);
  return plan;
}

void check_plan(const MemoryPlan& plan, const std::string& path) {
  const size_t n = plan.requests.size();
  if (n == 0) throw PlanError::at(path, "requests", "empty");
  if (n >= PlannedRequest::kOutlives)
    throw PlanError::at(path, "requests", "more than 2^32 requests");
  if (plan.arena_nbytes == 0 || plan.arena_nbytes % kGranule != 0 ||
      plan.arena_nbytes > kMaxArenaBytes) {
    throw PlanError::at(
        path, "arena_nbytes",
        fmt::format("is {}, expected a positive multiple of 512 up to 2^60", plan.arena_nbytes));
  }
  std::vector<std::vector<uint32_t>> due(n + 1);  // requests freed before allocation p
  std::map<size_t, size_t> taken;                 // live blocks: offset -> end
  const auto take = [&](size_t k, size_t offset) {
    const size_t end = offset + plan.requests[k].nbytes;
    auto next = taken.lower_bound(offset);
    const bool overlaps = (next != taken.end() && next->first < end) ||
                          (next != taken.begin() && std::prev(next)->second > offset);
    if (overlaps) {
      throw PlanError::at(
          path, fmt::format("requests[{}].offsets", k),
          fmt::format("[{}, {}) overlaps a block live at the same time", offset, end));
    }
    taken.emplace(offset, end);
  };
  for (size_t k = 0; k < n; ++k) {
    const PlannedRequest& r = plan.requests[k];
    const std::string where = fmt::format("requests[{}]", k);
    if (r.nbytes == 0 || r.nbytes % kGranule != 0) {
      throw PlanError::at(path, where + ".nbytes",
                          fmt::format("is {}, expected a positive multiple of 512", r.nbytes));
    }
    if (!r.outlives() && (r.free_before <= k || r.free_before > n)) {
      throw PlanError::at(path, where + ".free_before",
                          fmt::format("is {}, expected in ({}, {}]", r.free_before, k, n));
    }
    if (r.one_time && !r.outlives())
      throw PlanError::at(path, where + ".one_time",
                          "set on a request freed "
                          "within the step");
    const size_t max_copies = r.outlives() ? kMaxPlanCopies : 1;
    if (r.offsets.empty() || r.offsets.size() > max_copies) {
      throw PlanError::at(
          path, where + ".offsets",
          fmt::format("has {} entries, expected 1 to {}", r.offsets.size(), max_copies));
    }
    for (size_t offset : r.offsets) {
      if (offset % kGranule != 0 || offset > plan.arena_nbytes ||
          r.nbytes > plan.arena_nbytes - offset) {
        throw PlanError::at(path, where + ".offsets",
                            fmt::format("offset {} (+{}) is not a multiple of 512 "
                                        "inside the arena of {}",
                                        offset, r.nbytes, plan.arena_nbytes));
      }
    }
    if (!r.outlives()) due[r.free_before].push_back(static_cast<uint32_t>(k));
  }
  // Outliving copies hold their bytes for the whole step; the others from their allocation to
  // their free, in allocation order.
  for (size_t k = 0; k < n; ++k) {
    if (!plan.requests[k].outlives()) continue;
    for (size_t offset : plan.requests[k].offsets) take(k, offset);
  }
  for (size_t k = 0; k < n; ++k) {
    for (uint32_t j : due[k]) taken.erase(plan.requests[j].offsets[0]);
    if (!plan.requests[k].outlives()) take(k, plan.requests[k].offsets[0]);
  }
}

}  // namespace memgrad
