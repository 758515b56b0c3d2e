// Writing a file all or nothing: every file memgrad writes (checkpoints, safetensors, allocator
// traces, snapshots, lab pictures) goes through write_file_atomically.
//
// The bytes go to a fresh temporary file in the target's directory (mkstemp, so concurrent
// writers never share one, and a short name, so a long target name never grows past NAME_MAX),
// which is flushed to the disk and then renamed over the target. A reader sees the old file or
// the new one, never a torn one; a full disk, a file-size limit or a kill in the middle leaves
// the old file as it was and, where the process lives to clean up, no temporary file.
#pragma once

#include <string>
#include <string_view>

namespace memgrad {

// Replaces `path` with `bytes`. A symbolic link is followed: the file it points to is replaced
// and the link stays. A new file gets mode 0666 minus the umask; an existing one keeps its mode.
// Throws IoError naming the path and the reason (errno's text) when any step fails.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace memgrad
