// MEMGRAD_ALLOC_CONF parsing: every key, the list form of roundup_power2_divisions, the
// to_string round trip, the environment variable, and a ConfigError naming the key for every
// kind of bad input.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "allocator/bounded_memory.h"
#include "allocator/caching_allocator.h"
#include "allocator/config.h"
#include "allocator/error.h"
#include "tests/support/caught.h"
#include "tests/support/scoped_env.h"

using namespace memgrad;
using memgrad::testing::check_config_error;
using memgrad::testing::ScopedEnv;

namespace {

// The ConfigError that parsing `text` throws (fails the test when none is thrown).
ConfigError parse_error(const std::string& text) {
  try {
    AllocatorConfig::parse(text);
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("no ConfigError for '" << text << "'");
  return ConfigError("");
}

}  // namespace

TEST_SUITE("allocator") {

TEST_CASE("an empty configuration gives PyTorch's defaults") {
  const AllocatorConfig c = AllocatorConfig::parse("");
  CHECK_EQ(c.policy, "caching");
  CHECK_EQ(c.max_split_size, SIZE_MAX);
  CHECK_EQ(c.max_non_split_rounding_size, 20 * kMiB);
  for (size_t d : c.roundup_power2_divisions) CHECK_EQ(d, 0);
  CHECK_EQ(c.garbage_collection_threshold, 0.0);
  CHECK_EQ(c.memory_fraction, 1.0);
  CHECK_EQ(c.to_string(), "policy:caching");
}

TEST_CASE("each key sets its field, in MiB where the key says mb") {
  CHECK_EQ(AllocatorConfig::parse("policy:passthrough").policy, "passthrough");
  CHECK_EQ(AllocatorConfig::parse("max_split_size_mb:64").max_split_size, 64 * kMiB);
  CHECK_EQ(AllocatorConfig::parse("max_split_size_mb:21").max_split_size, 21 * kMiB);
  CHECK_EQ(AllocatorConfig::parse("max_non_split_rounding_mb:1024").max_non_split_rounding_size,
           1024 * kMiB);
  CHECK_EQ(AllocatorConfig::parse("garbage_collection_threshold:0.6").garbage_collection_threshold,
           0.6);
  CHECK_EQ(AllocatorConfig::parse("per_process_memory_fraction:0.25").memory_fraction, 0.25);
  CHECK_EQ(AllocatorConfig::parse("per_process_memory_fraction:1").memory_fraction, 1.0);
}

TEST_CASE("keys combine, and spaces and empty items are ignored") {
  const AllocatorConfig c = AllocatorConfig::parse(
      " policy : caching ,, max_split_size_mb: 128, garbage_collection_threshold:0.5 ,");
  CHECK_EQ(c.policy, "caching");
  CHECK_EQ(c.max_split_size, 128 * kMiB);
  CHECK_EQ(c.garbage_collection_threshold, 0.5);
}

TEST_CASE("roundup_power2_divisions as one value applies to every size bucket") {
  const AllocatorConfig c = AllocatorConfig::parse("roundup_power2_divisions:4");
  for (size_t d : c.roundup_power2_divisions) CHECK_EQ(d, 4);
  CHECK_EQ(c.divisions_for(1000), 4);
  CHECK_EQ(c.divisions_for(64 * kGiB), 4);
}

TEST_CASE("roundup_power2_divisions as a list sets buckets from each interval start") {
  // Bucket i covers [2^i MiB, 2^(i+1) MiB). 256:1 fills buckets 0..8, 512:2 sets bucket 9 on, and
  // >:8 every bucket after the last key (10..15), as PyTorch's parser does.
  const AllocatorConfig c = AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,>:8]");
  for (size_t i = 0; i <= 8; ++i) CHECK_EQ(c.roundup_power2_divisions[i], 1);
  CHECK_EQ(c.roundup_power2_divisions[9], 2);
  for (size_t i = 10; i < kRoundupIntervals; ++i) CHECK_EQ(c.roundup_power2_divisions[i], 8);
  CHECK_EQ(c.divisions_for(4096), 1);
  CHECK_EQ(c.divisions_for(300 * kMiB), 1);
  CHECK_EQ(c.divisions_for(600 * kMiB), 2);
  CHECK_EQ(c.divisions_for(2 * kGiB), 8);
}

TEST_CASE("to_string gives text that parses back to the same configuration") {
  const AllocatorConfig c = AllocatorConfig::parse(
      "policy:passthrough,max_split_size_mb:48,max_non_split_rounding_mb:64,"
      "roundup_power2_divisions:[1:2,64:4,>:16],garbage_collection_threshold:0.35,"
      "per_process_memory_fraction:0.8");
  const AllocatorConfig back = AllocatorConfig::parse(c.to_string());
  CHECK_EQ(back.policy, "passthrough");
  CHECK_EQ(back.max_split_size, 48 * kMiB);
  CHECK_EQ(back.max_non_split_rounding_size, 64 * kMiB);
  CHECK(back.roundup_power2_divisions == c.roundup_power2_divisions);
  CHECK_EQ(c.roundup_power2_divisions[0], 2);
  CHECK_EQ(c.roundup_power2_divisions[6], 4);
  CHECK_EQ(c.roundup_power2_divisions[15], 16);
  CHECK_EQ(back.garbage_collection_threshold, 0.35);
  CHECK_EQ(back.memory_fraction, 0.8);
  CHECK_EQ(back.to_string(), c.to_string());
}

TEST_CASE("an unknown key is a ConfigError naming the key") {
  check_config_error([] { AllocatorConfig::parse("foo:1"); }, "foo", "");
  const ConfigError e = parse_error("policy:caching,foo:1");
  CHECK_EQ(e.key, "foo");
  CHECK(std::string(e.what()).find("max_split_size_mb") != std::string::npos);  // lists known keys
}

TEST_CASE("a malformed integer is a ConfigError with the key and the value") {
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("max_split_size_mb:abc"),
                       doctest::Contains("expected an integer"), ConfigError);
  check_config_error([] { AllocatorConfig::parse("max_split_size_mb:64x"); }, "max_split_size_mb",
                     "64x");
  CHECK_THROWS_AS(AllocatorConfig::parse("max_split_size_mb:-64"), ConfigError);
  CHECK_THROWS_AS(AllocatorConfig::parse("max_non_split_rounding_mb:1.5"), ConfigError);
  const ConfigError e = parse_error("max_split_size_mb:12ab");
  CHECK_EQ(e.key, "max_split_size_mb");
  CHECK_EQ(e.value, "12ab");
}

TEST_CASE("a size in MiB too large for the address space is a ConfigError, not a wrapped value") {
  // 2^44 + 21 MiB is 2^64 + 21 MiB bytes: multiplied unchecked it would wrap to 21 MiB.
  check_config_error([] { AllocatorConfig::parse("max_split_size_mb:17592186044437"); },
                     "max_split_size_mb", "17592186044437");
  CHECK_THROWS_AS(AllocatorConfig::parse("max_non_split_rounding_mb:17592186044437"), ConfigError);
  CHECK_THROWS_AS(AllocatorConfig::parse("max_split_size_mb:99999999999999999999999"), ConfigError);
}

TEST_CASE("a max_non_split_rounding_mb near 2^44 MiB does not wrap when added to a request") {
  // A window of (2^44 - 1) MiB: 45 MiB plus it would wrap around 2^64 if added unchecked.
  BoundedMemory memory(256 * kMiB, "sim:0");
  CachingAllocator alloc(memory,
                         AllocatorConfig::parse("max_split_size_mb:40,"
                                                "max_non_split_rounding_mb:17592186044415"));
  Block big = alloc.allocate(50 * kMiB);
  void* first = big.ptr;
  alloc.free(big);
  Block again = alloc.allocate(45 * kMiB);
  CHECK_EQ(again.ptr, first);
  CHECK_EQ(again.nbytes, 50 * kMiB);
  CHECK_EQ(alloc.stats().num_device_alloc, 1);
  alloc.free(again);
}

TEST_CASE("max_split_size_mb must be above 20 and max_non_split_rounding_mb at least 20") {
  check_config_error([] { AllocatorConfig::parse("max_split_size_mb:20"); }, "max_split_size_mb",
                     "20");
  CHECK_THROWS_AS(AllocatorConfig::parse("max_split_size_mb:0"), ConfigError);
  CHECK_EQ(parse_error("max_split_size_mb:8").key, "max_split_size_mb");
  check_config_error([] { AllocatorConfig::parse("max_non_split_rounding_mb:19"); },
                     "max_non_split_rounding_mb", "19");
  CHECK_EQ(AllocatorConfig::parse("max_non_split_rounding_mb:20").max_non_split_rounding_size,
           20 * kMiB);
}

TEST_CASE("divisions and interval starts must be powers of two") {
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("roundup_power2_divisions:3"),
                       doctest::Contains("power of 2"), ConfigError);
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("roundup_power2_divisions:[256:3]"),
                       doctest::Contains("power of 2"), ConfigError);
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("roundup_power2_divisions:[300:2]"),
                       doctest::Contains("interval starts must be powers of 2"), ConfigError);
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("roundup_power2_divisions:[512:2,256:1]"),
                       doctest::Contains("increasing"), ConfigError);
  CHECK_THROWS_AS(AllocatorConfig::parse("roundup_power2_divisions:[256:2"), ConfigError);
  CHECK_EQ(parse_error("roundup_power2_divisions:6").value, "6");
  // 0 switches the rounding off for a bucket, as in PyTorch.
  CHECK_EQ(AllocatorConfig::parse("roundup_power2_divisions:0").divisions_for(kMiB), 0);
}

TEST_CASE("garbage_collection_threshold must be strictly between 0 and 1") {
  for (const char* bad : {"0", "1", "1.0", "-0.5", "1.5", "nan", "x"}) {
    CAPTURE(bad);
    const ConfigError e = parse_error(std::string("garbage_collection_threshold:") + bad);
    CHECK_EQ(e.key, "garbage_collection_threshold");
  }
  check_config_error([] { AllocatorConfig::parse("garbage_collection_threshold:1.5"); },
                     "garbage_collection_threshold", "1.5");
}

TEST_CASE("per_process_memory_fraction must be in (0, 1]") {
  for (const char* bad : {"0", "-0.1", "1.01", "2", "nan"}) {
    CAPTURE(bad);
    const ConfigError e = parse_error(std::string("per_process_memory_fraction:") + bad);
    CHECK_EQ(e.key, "per_process_memory_fraction");
  }
  check_config_error([] { AllocatorConfig::parse("per_process_memory_fraction:1.5"); },
                     "per_process_memory_fraction", "1.5");
}

TEST_CASE("a key without a value is a ConfigError") {
  check_config_error([] { AllocatorConfig::parse("max_split_size_mb:"); }, "max_split_size_mb", "");
  CHECK_THROWS_AS(AllocatorConfig::parse("policy:,max_split_size_mb:64"), ConfigError);
  CHECK_EQ(parse_error("garbage_collection_threshold:").key, "garbage_collection_threshold");
}

TEST_CASE("a key without ':' is a ConfigError") {
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("max_split_size_mb"),
                       doctest::Contains("expected ':' after 'max_split_size_mb'"), ConfigError);
  CHECK_THROWS_AS(AllocatorConfig::parse("policy:caching,max_split_size_mb 64"), ConfigError);
  CHECK_EQ(parse_error("max_split_size_mb").key, "max_split_size_mb");
}

TEST_CASE("stray punctuation, a missing comma and a repeated key say what is wrong") {
  // Once: "expected ':' after ':'" for both.
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse(":"), doctest::Contains("expected a key, got ':'"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("policy:caching;max_split_size_mb:100"),
                       doctest::Contains("expected ',' after the value of 'policy', got ':'"),
                       ConfigError);
  check_config_error([] { AllocatorConfig::parse("max_split_size_mb:64,max_split_size_mb:128"); },
                     "max_split_size_mb", "");
  CHECK_EQ(parse_error("policy:caching,policy:first_fit").key, "policy");
  // The largest power of two in size_t is not a number of divisions.
  CHECK_THROWS_WITH_AS(AllocatorConfig::parse("roundup_power2_divisions:9223372036854775808"),
                       doctest::Contains("at most 65536 divisions"), ConfigError);
  CHECK_THROWS_AS(AllocatorConfig::parse("roundup_power2_divisions:[256:131072]"), ConfigError);
  CHECK_EQ(AllocatorConfig::parse("roundup_power2_divisions:65536").roundup_power2_divisions[0],
           65536);
}

TEST_CASE("parse_memory_size reads binary and decimal units and refuses what no size_t holds") {
  CHECK_EQ(parse_memory_size("256MiB"), 256 * kMiB);
  CHECK_EQ(parse_memory_size("1.5 GiB"), 3 * kGiB / 2);
  CHECK_EQ(parse_memory_size("2KB"), 2000);
  CHECK_EQ(parse_memory_size("4096"), 4096);
  for (const char* bad : {"1e30", "inf", "nan", "-1", "12 parsecs", "", "MiB"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_memory_size(bad, "--memory-limit"), ConfigError);
  }
  CHECK_THROWS_WITH_AS(parse_memory_size("1e30", "--memory-limit"),
                       doctest::Contains("--memory-limit: '1e30' is more bytes"), ConfigError);
}

TEST_CASE("validate rejects out-of-range fields set through the C++ API") {
  AllocatorConfig c;
  c.memory_fraction = 0.0;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c = AllocatorConfig{};
  c.garbage_collection_threshold = 1.0;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c = AllocatorConfig{};
  c.roundup_power2_divisions[3] = 5;
  CHECK_THROWS_AS(c.validate(), ConfigError);
  CHECK_NOTHROW(AllocatorConfig{}.validate());
}

TEST_CASE("the planned keys set the plan path and the warm-up, and round-trip through to_string") {
  const AllocatorConfig a =
      AllocatorConfig::parse("policy:planned,planned_plan:traces/mlp_step.json");
  CHECK_EQ(a.policy, "planned");
  CHECK_EQ(a.planned_plan, "traces/mlp_step.json");
  CHECK_EQ(a.planned_warmup_steps, 0);
  CHECK_EQ(a.to_string(), "policy:planned,planned_plan:traces/mlp_step.json");
  CHECK_EQ(AllocatorConfig::parse(a.to_string()).planned_plan, a.planned_plan);
  const AllocatorConfig b = AllocatorConfig::parse(
      "planned_warmup_steps:3,policy:planned,"
      "per_process_memory_fraction:0.5");
  CHECK_EQ(b.planned_warmup_steps, 3);
  const AllocatorConfig back = AllocatorConfig::parse(b.to_string());
  CHECK_EQ(back.planned_warmup_steps, 3);
  CHECK_EQ(back.memory_fraction, 0.5);
  CHECK_EQ(back.to_string(), b.to_string());
  CHECK_EQ(AllocatorConfig::parse("policy:planned").to_string(), "policy:planned");
  CHECK_EQ(AllocatorConfig::parse(
               fmt::format("policy:planned,planned_warmup_steps:{}", kMaxPlannedWarmupSteps))
               .planned_warmup_steps,
           kMaxPlannedWarmupSteps);
}

TEST_CASE("bad planned keys are ConfigErrors naming the key") {
  for (const char* bad : {"0", "-1", "abc", "2.5", "1001", "99999999999999999999999"}) {
    CAPTURE(bad);
    const ConfigError e = parse_error(std::string("policy:planned,planned_warmup_steps:") + bad);
    CHECK_EQ(e.key, "planned_warmup_steps");
  }
  check_config_error([] { AllocatorConfig::parse("policy:planned,planned_warmup_steps:0"); },
                     "planned_warmup_steps", "0");
  // The keys belong to policy:planned, whatever the order they are written in.
  const ConfigError other = parse_error("planned_plan:plan.json,policy:arena");
  CHECK_EQ(other.key, "planned_plan");
  CHECK(std::string(other.what()).find("policy:planned only") != std::string::npos);
  CHECK_EQ(parse_error("planned_warmup_steps:2").key, "planned_warmup_steps");  // caching
  CHECK_THROWS_WITH_AS(
      AllocatorConfig::parse("policy:planned,planned_plan:p.json,planned_warmup_steps:2"),
      doctest::Contains("not both"), ConfigError);
  CHECK_EQ(parse_error("policy:planned,planned_plan:").key, "planned_plan");
  // The C++ API cannot set a path the text form could not carry back.
  AllocatorConfig c;
  c.policy = "planned";
  c.planned_plan = "my plans/step.json";
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("cannot hold"), ConfigError);
  c.planned_plan = "C:step.json";
  CHECK_THROWS_AS(c.validate(), ConfigError);
  c.planned_plan.clear();
  c.planned_warmup_steps = kMaxPlannedWarmupSteps + 1;
  CHECK_THROWS_AS(c.validate(), ConfigError);
}

TEST_CASE("from_env reads MEMGRAD_ALLOC_CONF, and unset or empty means the defaults") {
  {
    ScopedEnv env("MEMGRAD_ALLOC_CONF", "max_split_size_mb:96,policy:passthrough");
    const AllocatorConfig c = AllocatorConfig::from_env();
    CHECK_EQ(c.max_split_size, 96 * kMiB);
    CHECK_EQ(c.policy, "passthrough");
  }
  {
    ScopedEnv env("MEMGRAD_ALLOC_CONF", nullptr);
    CHECK_EQ(AllocatorConfig::from_env().to_string(), "policy:caching");
  }
  {
    ScopedEnv env("MEMGRAD_ALLOC_CONF", "");
    CHECK_EQ(AllocatorConfig::from_env().to_string(), "policy:caching");
  }
  {
    ScopedEnv env("MEMGRAD_ALLOC_CONF", "max_split_sise_mb:96");
    CHECK_THROWS_WITH_AS(AllocatorConfig::from_env(),
                         doctest::Contains("Unrecognized key 'max_split_sise_mb'"), ConfigError);
  }
  {
    ScopedEnv env("MEMGRAD_TEST_OTHER_CONF", "per_process_memory_fraction:0.5");
    CHECK_EQ(AllocatorConfig::from_env("MEMGRAD_TEST_OTHER_CONF").memory_fraction, 0.5);
  }
}

}  // TEST_SUITE("allocator")
