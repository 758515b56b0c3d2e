// Writing a file all or nothing: every file memgrad writes (checkpoints, safetensors, allocator
// traces, snapshots, lab pictures) goes through write_file_atomically.
//
// The bytes go to a fresh temporary file in the target's directory (mkstemp, so concurrent
// writers never share one, and a short name, so a long target name never grows past NAME_MAX),
// which is flushed to the disk and then renamed over the target. A reader sees the old file or
// the new one, never a torn one; a full disk, a file-size limit or a kill in the middle leaves
// the old file as it was and, where the process lives to clean up, no temporary file.
//
// A process killed while writing (SIGKILL, a power cut) cannot clean up: its temporary file
// stays. Each temporary file is named after its target (temporary_prefix) and locked (flock) by
// its writer until the rename, so the next save of the same target removes the ones nobody
// holds that are more than 2 seconds old: those of writers that died. A live writer's file is
// left alone.
#pragma once

#include <string>
#include <string_view>

namespace memgrad {

// Replaces `path` with `bytes`. A symbolic link is followed: the file it points to is replaced
// and the link stays. A new file gets mode 0666 minus the umask; an existing one keeps its mode.
// Throws IoError naming the path and the reason (errno's text) when any step fails.
void write_file_atomically(const std::string& path, std::string_view bytes);

// ".memgrad-<16 hex digits>-": the start of the temporary files' names for target `path` (the
// digits hash the target's file name), for tests and cleanup tools.
std::string temporary_prefix(const std::string& path);

}  // namespace memgrad
