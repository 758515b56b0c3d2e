// Plan files: a plan as JSON and back, and a plan read from a plan, a trace or a snapshot file.
#include "lab/plan_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "interop/error.h"
#include "interop/snapshot_import.h"
#include "interop/trace_reader.h"
#include "lab/memory_plan.h"

namespace memgrad {
namespace {

constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 60;  // the request guard of PolicyAllocator

uint64_t read_uint(const nlohmann::json& j, const char* key, const std::string& where,
                   const std::string& path, uint64_t max) {
  const std::string field = where.empty() ? key : fmt::format("{}.{}", where, key);
  if (!j.contains(key)) throw PlanError::at(path, field, "missing");
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max) {
    throw PlanError::at(path, field,
                        fmt::format("is {}, expected an integer in [0, {}]", v.dump(), max));
  }
  return v.get<uint64_t>();
}

PlannedRequest request_from_json(const nlohmann::json& j, size_t index, const std::string& path) {
  const std::string where = fmt::format("requests[{}]", index);
  if (!j.is_object()) throw PlanError::at(path, where, "expected an object");
  PlannedRequest r;
  r.nbytes = read_uint(j, "nbytes", where, path, kMaxArenaBytes);
  if (j.contains("free_before")) {
    r.free_before = static_cast<uint32_t>(
        read_uint(j, "free_before", where, path, PlannedRequest::kOutlives - 1));
  }
  if (j.contains("one_time")) {
    if (!j.at("one_time").is_boolean())
      throw PlanError::at(path, where + ".one_time", "expected true or false");
    r.one_time = j.at("one_time").get<bool>();
  }
  if (!j.contains("offsets") || !j.at("offsets").is_array()) {
    throw PlanError::at(path, where + ".offsets", "missing or not an array");
  }
  for (size_t c = 0; c < j.at("offsets").size(); ++c) {
    const nlohmann::json& v = j.at("offsets")[c];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > kMaxArenaBytes) {
      throw PlanError::at(path, fmt::format("{}.offsets[{}]", where, c),
                          fmt::format("is {}, expected an integer in [0, 2^60]", v.dump()));
    }
    r.offsets.push_back(v.get<size_t>());
  }
  return r;
}

std::string read_text(const std::string& path) {
  // A plan, trace or snapshot is a file of a known size; /dev/zero or a pipe would be read for
  // ever (or until memory runs out).
  std::error_code error;
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error)) {
    throw IoError(fmt::format("plan: '{}' is not a regular file (a plan, a trace or a snapshot "
                              "file is one)",
                              path),
                  path, 0);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("plan: cannot open '{}'", path), path, errno);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string plan_to_json(const MemoryPlan& plan) {
  nlohmann::json requests = nlohmann::json::array();
  for (const PlannedRequest& r : plan.requests) {
    nlohmann::json j = {{"nbytes", r.nbytes}, {"offsets", r.offsets}};
    if (!r.outlives()) j["free_before"] = r.free_before;
    if (r.one_time) j["one_time"] = true;
    requests.push_back(std::move(j));
  }
  const nlohmann::json doc = {{"memgrad_plan", 1},
                              {"source", plan.source},
                              {"steps_recorded", plan.steps_recorded},
                              {"planned_step", plan.planned_step},
                              {"arena_nbytes", plan.arena_nbytes},
                              {"ideal_nbytes", plan.ideal_nbytes},
                              {"requests", std::move(requests)}};
  return doc.dump() + "\n";
}

MemoryPlan plan_from_json(std::string_view json, const std::string& path) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    throw PlanError::at(path, "(document)", "not a JSON object");
  if (!doc.contains("memgrad_plan"))
    throw PlanError::at(path, "memgrad_plan", "missing (not a memgrad plan?)");
  if (doc.at("memgrad_plan") != 1) {
    throw PlanError::at(
        path, "memgrad_plan",
        fmt::format("version {} (this build reads 1)", doc.at("memgrad_plan").dump()));
  }
  MemoryPlan plan;
  plan.arena_nbytes = read_uint(doc, "arena_nbytes", "", path, kMaxArenaBytes);
  plan.ideal_nbytes = read_uint(doc, "ideal_nbytes", "", path, kMaxArenaBytes);
  plan.steps_recorded =
      static_cast<uint32_t>(read_uint(doc, "steps_recorded", "", path, UINT32_MAX));
  plan.planned_step = static_cast<uint32_t>(read_uint(doc, "planned_step", "", path, UINT32_MAX));
  if (doc.contains("source") && doc.at("source").is_string()) {
    plan.source = doc.at("source").get<std::string>();
  }
  if (!doc.contains("requests") || !doc.at("requests").is_array()) {
    throw PlanError::at(path, "requests", "missing or not an array");
  }
  const nlohmann::json& requests = doc.at("requests");
  for (size_t i = 0; i < requests.size(); ++i) {
    plan.requests.push_back(request_from_json(requests[i], i, path));
  }
  check_plan(plan, path);
  return plan;
}

MemoryPlan read_plan_file(const std::string& path) {
  const std::string text = read_text(path);
  if (is_snapshot_bytes(text.substr(0, 4096))) {
    ImportedSnapshot imported = import_snapshot(read_snapshot_file(path));
    RecordedTrace trace;
    trace.events = std::move(imported.events);
    trace.contexts = std::move(imported.contexts);
    return plan_trace(trace, path);
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("memgrad_events")) {
    try {
      return plan_trace(parse_trace(text), path);
    } catch (const TraceError& e) {
      throw TraceError(fmt::format("{} (in '{}')", e.what(), path), e.place, e.field, path);
    }
  }
  return plan_from_json(text, path);
}

}  // namespace memgrad
