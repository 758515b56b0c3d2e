// Parsing MEMGRAD_ALLOC_CONF. The lexer follows PyTorch's: tokens are split at ',' ':' '[' ']'
// and spaces are dropped; a key is followed by ':' and a value, and only
// roundup_power2_divisions takes a bracketed list.
#include "allocator/config.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allocator/error.h"

namespace memgrad {
namespace {

constexpr std::string_view kVar = "MEMGRAD_ALLOC_CONF";
constexpr std::string_view kKnownKeys =
    "policy, expandable_segments, max_split_size_mb, max_non_split_rounding_mb, "
    "roundup_power2_divisions, garbage_collection_threshold, per_process_memory_fraction, "
    "planned_plan, planned_warmup_steps";
// What the text form cannot carry inside a value: the lexer splits at these and drops spaces.
constexpr std::string_view kValueBreakers = ",:[] \t";

std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : text) {
    if (c == ' ' || c == '\t') continue;
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!current.empty()) tokens.push_back(std::move(current));
      current.clear();
      tokens.emplace_back(1, c);
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

[[noreturn]] void fail(std::string_view key, std::string_view value, std::string_view why) {
  throw ConfigError(fmt::format("{}: bad value '{}' for key '{}': {}", kVar, value, key, why),
                    std::string(key), std::string(value));
}

size_t parse_size(std::string_view key, std::string_view text) {
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) fail(key, text, "expected an integer");
  return value;
}

// A size written in MiB, as bytes. A count whose bytes do not fit in size_t is an error, not a
// wrapped (and possibly valid-looking) number.
size_t parse_mib(std::string_view key, std::string_view text) {
  const size_t mib = parse_size(key, text);
  if (mib > SIZE_MAX / kMiB) fail(key, text, "too large");
  return mib * kMiB;
}

double parse_double(std::string_view key, std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) fail(key, text, "expected a number");
  return value;
}

bool is_power_of_two_or_zero(size_t v) { return v == 0 || std::has_single_bit(v); }

// Reads `key:value` tokens; `pos` points at the token after the key.
class Parser {
 public:
  explicit Parser(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  AllocatorConfig run() {
    AllocatorConfig config;
    while (pos_ < tokens_.size()) {
      const std::string key = tokens_[pos_++];
      if (key == ",") continue;
      if (is_punctuation(key)) {
        throw ConfigError(
            fmt::format("{}: expected a key, got '{}' (entries are key:value, "
                        "separated by commas)",
                        kVar, key));
      }
      if (!seen_.insert(key).second) {
        throw ConfigError(fmt::format("{}: key '{}' is given twice", kVar, key), key);
      }
      expect(":", key);
      apply(config, key);
      // An entry ends at a comma or at the end: "policy:caching;max_split_size_mb:100" is one
      // value followed by a stray ':', which says more than "expected ':' after ':'".
      if (pos_ < tokens_.size() && tokens_[pos_] != ",") {
        throw ConfigError(fmt::format("{}: expected ',' after the value of '{}', got '{}' (entries "
                                      "are separated by commas)",
                                      kVar, key, tokens_[pos_]),
                          key);
      }
    }
    resolve_expandable(config);
    config.validate();
    return config;
  }

 private:
  void expect(std::string_view token, std::string_view key) {
    if (pos_ >= tokens_.size() || tokens_[pos_] != token) {
      throw ConfigError(fmt::format("{}: expected '{}' after '{}'", kVar, token, key),
                        std::string(key));
    }
    ++pos_;
  }

  static bool is_punctuation(const std::string& token) {
    return token == "," || token == ":" || token == "[" || token == "]";
  }

  std::string value(std::string_view key) {
    if (pos_ >= tokens_.size() || is_punctuation(tokens_[pos_])) {
      throw ConfigError(fmt::format("{}: missing value for key '{}'", kVar, key), std::string(key));
    }
    return tokens_[pos_++];
  }

  void apply(AllocatorConfig& config, const std::string& key) {
    if (key == "policy") {
      config.policy = value(key);
      policy_written_ = true;
    } else if (key == "expandable_segments") {
      const std::string v = value(key);
      if (v != "True" && v != "False") fail(key, v, "expected True or False");
      expandable_ = v == "True" ? 1 : 0;
    } else if (key == "max_split_size_mb") {
      const std::string v = value(key);
      config.max_split_size = parse_mib(key, v);
      if (config.max_split_size <= 20 * kMiB) fail(key, v, "must be > 20 (MiB)");
    } else if (key == "max_non_split_rounding_mb") {
      const std::string v = value(key);
      config.max_non_split_rounding_size = parse_mib(key, v);
      if (config.max_non_split_rounding_size < 20 * kMiB) fail(key, v, "must be >= 20 (MiB)");
    } else if (key == "roundup_power2_divisions") {
      parse_divisions(config, key);
    } else if (key == "garbage_collection_threshold") {
      const std::string v = value(key);
      config.garbage_collection_threshold = parse_double(key, v);
      // 0 means "off" only as the default; a written value must be in (0, 1), as in PyTorch.
      const double t = config.garbage_collection_threshold;
      if (!(t > 0.0 && t < 1.0)) fail(key, v, "must be in (0, 1)");
    } else if (key == "per_process_memory_fraction") {
      config.memory_fraction = parse_double(key, value(key));
    } else if (key == "planned_plan") {
      config.planned_plan = value(key);
    } else if (key == "planned_warmup_steps") {
      const std::string v = value(key);
      config.planned_warmup_steps = parse_size(key, v);
      if (config.planned_warmup_steps == 0 ||
          config.planned_warmup_steps > kMaxPlannedWarmupSteps) {
        fail(key, v, fmt::format("must be in [1, {}]", kMaxPlannedWarmupSteps));
      }
    } else {
      throw ConfigError(
          fmt::format("Unrecognized key '{}' in {} (known keys: {})", key, kVar, kKnownKeys), key);
    }
  }

  // A power of two (0 or 1: no rounding) up to kMaxDivisions: more divisions than that would
  // make steps below the 512-byte block size in every interval.
  static size_t parse_divisions_value(const std::string& key, const std::string& v) {
    constexpr size_t kMaxDivisions = size_t{1} << 16;
    const size_t d = parse_size(key, v);
    if (!is_power_of_two_or_zero(d)) fail(key, v, "divisions must be a power of 2");
    if (d > kMaxDivisions) fail(key, v, fmt::format("at most {} divisions", kMaxDivisions));
    return d;
  }

  // Either one power of two for every bucket, or [MiB:N, MiB:N, >:N].
  void parse_divisions(AllocatorConfig& config, const std::string& key) {
    if (pos_ < tokens_.size() && tokens_[pos_] != "[") {
      const std::string v = value(key);
      config.roundup_power2_divisions.fill(parse_divisions_value(key, v));
      return;
    }
    expect("[", key);
    int last_bucket = -1;
    bool first = true;
    while (pos_ < tokens_.size() && tokens_[pos_] != "]") {
      if (tokens_[pos_] == ",") {
        ++pos_;
        continue;
      }
      const std::string interval = value(key);
      expect(":", key);
      const std::string v = value(key);
      const size_t d = parse_divisions_value(key, v);
      if (interval == ">") {
        for (size_t i = static_cast<size_t>(last_bucket + 1); i < kRoundupIntervals; ++i) {
          config.roundup_power2_divisions[i] = d;
        }
        continue;
      }
      const size_t mib = parse_size(key, interval);
      if (mib == 0 || !std::has_single_bit(mib)) {
        fail(key, interval, "interval starts must be powers of 2 (MiB)");
      }
      const int bucket = std::min<int>(std::countr_zero(mib), kRoundupIntervals - 1);
      if (bucket <= last_bucket) fail(key, interval, "intervals must be increasing");
      // The first value also covers the buckets below it; later values run to the next key.
      const size_t from = first ? 0 : static_cast<size_t>(bucket);
      for (size_t i = from; i < kRoundupIntervals; ++i) config.roundup_power2_divisions[i] = d;
      last_bucket = bucket;
      first = false;
    }
    expect("]", key);
  }

  // PyTorch's expandable_segments:True is policy:expandable here; False keeps the policy
  // (caching unless one is written). Either in any order with a policy that disagrees is an
  // error rather than a silent choice.
  void resolve_expandable(AllocatorConfig& config) const {
    if (expandable_ < 0) return;
    const bool on = expandable_ == 1;
    const bool agrees = on ? config.policy == "caching" || config.policy == "expandable"
                           : config.policy != "expandable";
    if (policy_written_ && !agrees) {
      throw ConfigError(fmt::format("{}: expandable_segments:{} conflicts with policy:{}", kVar,
                                    on ? "True" : "False", config.policy),
                        "expandable_segments", on ? "True" : "False");
    }
    if (on) config.policy = "expandable";
  }

  std::vector<std::string> tokens_;
  std::set<std::string> seen_;  // keys given so far
  size_t pos_ = 0;
  bool policy_written_ = false;
  int expandable_ = -1;  // -1: not written, 0: False, 1: True
};

}  // namespace

AllocatorConfig AllocatorConfig::parse(std::string_view text) {
  return Parser(tokenize(text)).run();
}

AllocatorConfig AllocatorConfig::from_env(const char* var) {
  const char* text = std::getenv(var);
  if (text == nullptr) return AllocatorConfig{};
  return parse(text);
}

void AllocatorConfig::validate() const {
  if (!(garbage_collection_threshold == 0.0 ||
        (garbage_collection_threshold > 0.0 && garbage_collection_threshold < 1.0))) {
    fail("garbage_collection_threshold", fmt::format("{}", garbage_collection_threshold),
         "must be in (0, 1)");
  }
  if (!(memory_fraction > 0.0 && memory_fraction <= 1.0)) {
    fail("per_process_memory_fraction", fmt::format("{}", memory_fraction), "must be in (0, 1]");
  }
  for (size_t d : roundup_power2_divisions) {
    if (!is_power_of_two_or_zero(d)) {
      fail("roundup_power2_divisions", fmt::format("{}", d), "divisions must be a power of 2");
    }
  }
  validate_planned();
}

void AllocatorConfig::validate_planned() const {
  const bool any = !planned_plan.empty() || planned_warmup_steps != 0;
  if (any && policy != "planned") {
    const std::string key = planned_plan.empty() ? "planned_warmup_steps" : "planned_plan";
    fail(key, planned_plan.empty() ? fmt::format("{}", planned_warmup_steps) : planned_plan,
         fmt::format("applies to policy:planned only (the policy is {})", policy));
  }
  if (!planned_plan.empty() && planned_warmup_steps != 0) {
    fail("planned_warmup_steps", fmt::format("{}", planned_warmup_steps),
         "give planned_plan or planned_warmup_steps, not both");
  }
  if (planned_plan.find_first_of(kValueBreakers) != std::string::npos) {
    fail("planned_plan", planned_plan,
         "a path in MEMGRAD_ALLOC_CONF cannot hold ',', ':', '[', ']' or spaces");
  }
  if (planned_warmup_steps > kMaxPlannedWarmupSteps) {
    fail("planned_warmup_steps", fmt::format("{}", planned_warmup_steps),
         fmt::format("must be in [1, {}]", kMaxPlannedWarmupSteps));
  }
}

size_t AllocatorConfig::divisions_for(size_t nbytes) const {
  const int log_size = 63 - std::countl_zero(static_cast<uint64_t>(nbytes | 1));
  const int bucket = std::clamp(log_size - 20, 0, static_cast<int>(kRoundupIntervals) - 1);
  return roundup_power2_divisions[static_cast<size_t>(bucket)];
}

std::string AllocatorConfig::to_string() const {
  std::string out = fmt::format("policy:{}", policy);
  if (max_split_size != SIZE_MAX)
    out += fmt::format(",max_split_size_mb:{}", max_split_size / kMiB);
  if (max_non_split_rounding_size != 20 * kMiB) {
    out += fmt::format(",max_non_split_rounding_mb:{}", max_non_split_rounding_size / kMiB);
  }
  bool any_division = false;
  for (size_t d : roundup_power2_divisions) any_division |= d != 0;
  if (any_division) {
    out += ",roundup_power2_divisions:[";
    for (size_t i = 0; i < kRoundupIntervals; ++i) {
      out += fmt::format("{}{}:{}", i == 0 ? "" : ",", size_t{1} << i, roundup_power2_divisions[i]);
    }
    out += "]";
  }
  if (garbage_collection_threshold != 0.0) {
    out += fmt::format(",garbage_collection_threshold:{}", garbage_collection_threshold);
  }
  if (memory_fraction != 1.0)
    out += fmt::format(",per_process_memory_fraction:{}", memory_fraction);
  if (!planned_plan.empty()) out += fmt::format(",planned_plan:{}", planned_plan);
  if (planned_warmup_steps != 0) {
    out += fmt::format(",planned_warmup_steps:{}", planned_warmup_steps);
  }
  return out;
}

size_t parse_memory_size(std::string_view text, std::string_view what) {
  std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  std::string_view unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KiB")
    scale = static_cast<double>(kKiB);
  else if (unit == "M" || unit == "MiB")
    scale = static_cast<double>(kMiB);
  else if (unit == "G" || unit == "GiB")
    scale = static_cast<double>(kGiB);
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  if (end == s.c_str() || scale == 0 || !(value >= 0) || !std::isfinite(value)) {
    throw ConfigError(fmt::format("{}: cannot read '{}' as a size (examples: 256MiB, 1.5GiB, "
                                  "4096)",
                                  what, text),
                      std::string(what), s);
  }
  // Compared as a double before the cast: 1e30 bytes has no size_t value.
  const double nbytes = value * scale;
  if (!(nbytes < 18446744073709551616.0)) {  // 2^64
    throw ConfigError(fmt::format("{}: '{}' is more bytes than a 64-bit size can hold", what, text),
                      std::string(what), s);
  }
  return static_cast<size_t>(nbytes);
}

}  // namespace memgrad
