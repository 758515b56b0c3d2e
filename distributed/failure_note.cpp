// Failure notes: the file format of failure_note.h.
#include "distributed/failure_note.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace memgrad::distributed {

void write_failure_note(const FailureNote& note) {
  const char* path = std::getenv(kErrorFileVariable);
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::trunc);
  out << fmt::format("gone {}\n{}\n", fmt::join(note.gone, " "), note.message);
}

std::optional<FailureNote> read_failure_note(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  if (!std::getline(in, first)) return std::nullopt;
  std::istringstream words(first);
  std::string tag;
  if (!(words >> tag) || tag != "gone") return std::nullopt;
  FailureNote note;
  for (int r = 0; words >> r;) note.gone.push_back(r);
  std::getline(in, note.message);
  return note;
}

}  // namespace memgrad::distributed
