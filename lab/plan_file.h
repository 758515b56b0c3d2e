// Plan files: a MemoryPlan as JSON and back, and the plan `planned_plan:PATH` names, read from a
// plan file, or planned from a memgrad trace or memory snapshot.
#pragma once

#include <string>
#include <string_view>

#include "lab/memory_plan.h"

namespace memgrad {

// The plan as JSON ({"memgrad_plan": 1, "arena_nbytes": ..., "requests": [...]}) and back.
// plan_from_json checks the plan (check_plan) and throws PlanError for anything malformed.
std::string plan_to_json(const MemoryPlan& plan);
MemoryPlan plan_from_json(std::string_view json, const std::string& path = {});

// Reads `path`: a plan file (plan_to_json), or a memgrad trace or memory snapshot to plan from
// (plan_trace). Throws IoError when it cannot be read, PlanError / TraceError when it is neither.
MemoryPlan read_plan_file(const std::string& path);

}  // namespace memgrad
