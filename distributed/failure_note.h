// Failure notes: how a launcher tells the rank that failed first from those that failed because
// of it (torchrun's error files, TORCHELASTIC_ERROR_FILE, serve the same purpose).
//
// When one rank exits, its peers fail too, a moment later, in their next collective. Their
// processes can end so close together that the launcher cannot tell from the order it reaps them
// which came first. So a launcher (`./memgrad launch`, spawn_ranks) gives every rank a file in
// MEMGRAD_ERROR_FILE, and a ProcessGroup that throws RankFailureError after finding peers gone
// writes, before the error reaches the program:
//
//   gone 1 3                                     the ranks whose processes had exited
//   [all_reduce] collective #2 failed on rank 0: rank 1 (pid 4242) has exited. ...
//
// A rank named there ended before this one noticed, so its own exit status is the launch's
// first failure (when non-zero). Without the variable nothing is written.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace memgrad::distributed {

inline constexpr const char* kErrorFileVariable = "MEMGRAD_ERROR_FILE";

struct FailureNote {
  std::vector<int> gone;  // ranks found exited, increasing
  std::string message;    // the RankFailureError's message
};

// Writes the note to $MEMGRAD_ERROR_FILE if set (replacing it); a write that fails is ignored:
// the error the program gets matters more than the note.
void write_failure_note(const FailureNote& note);

// The note at `path`, or nullopt when there is none or its first line is not "gone R...".
std::optional<FailureNote> read_failure_note(const std::string& path);

// The rank to report as the first failure: starting at `failed`, follows each note's first gone
// rank whose status is non-zero (`failed_status(rank)`, 0 for a rank that did not fail), at most
// `world_size` steps. `note_path(rank)` is the rank's error file.
template <typename NotePath, typename FailedStatus>
int root_failure(int failed, int world_size, NotePath note_path, FailedStatus failed_status) {
  for (int step = 0; step < world_size; ++step) {
    const std::optional<FailureNote> note = read_failure_note(note_path(failed));
    if (!note) break;
    int cause = -1;
    for (int r : note->gone) {
      if (r != failed && r >= 0 && r < world_size && failed_status(r) != 0) {
        cause = r;
        break;
      }
    }
    if (cause < 0) break;
    failed = cause;
  }
  return failed;
}

}  // namespace memgrad::distributed
