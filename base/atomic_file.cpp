// Atomic file replacement: temporary file, fsync, rename, fsync of the directory.
#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"

namespace memgrad {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& step, int error) {
  throw IoError(fmt::format("cannot write '{}': {} failed: {}", path, step, std::strerror(error)),
                path, error);
}

// The file a path names: symbolic links followed (each relative to the link's folder), up to
// the 40 hops Linux allows.
fs::path resolve_links(const std::string& path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(p, ec)) return p;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) fail(path, "reading the symbolic link", ec.value());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  fail(path, "following symbolic links", ELOOP);
}

// The mode a replacement gets: the old file's, or 0666 minus the umask for a new one.
mode_t mode_for(const fs::path& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) return st.st_mode & 07777;
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// ".memgrad-<hash of the file name>-" (FNV-1a): short whatever the target's name.
std::string prefix_for(const fs::path& target) {
  uint64_t hash = 14695981039346656037ULL;
  for (const char c : target.filename().string()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return fmt::format(".memgrad-{:016x}-", hash);
}

// Removes the temporary files of `prefix` in `dir` that no writer holds: a live writer locks
// its file right after creating it and keeps the lock until the rename; the lock of a killed
// one went with it. A file younger than kStaleAge may be a writer's between its creation and
// its lock: it is left alone.
constexpr auto kStaleAge = std::chrono::seconds(2);

void remove_stale_temporaries(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st {};
    const bool old =
        ::fstat(fd, &st) == 0 &&
        std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime) >
            kStaleAge;
    if (old && ::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(it->path().c_str());
    ::close(fd);
  }
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "write", errno);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  if (path.empty()) throw IoError("cannot write a file with an empty name", path);
  const fs::path target = resolve_links(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = prefix_for(target);
  remove_stale_temporaries(dir, prefix);
  std::string tmp = (dir / (prefix + "XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, fmt::format("creating a temporary file in '{}'", dir.string()), errno);
  try {
    // Held until the rename: a concurrent save of the same target leaves this file alone.
    if (::flock(fd, LOCK_EX) != 0) fail(path, "locking the temporary file", errno);
    write_all(fd, bytes, path);
    if (::fchmod(fd, mode_for(target)) != 0) fail(path, "fchmod", errno);
    if (::fsync(fd) != 0) fail(path, "fsync", errno);
    if (::rename(tmp.c_str(), target.c_str()) != 0) fail(path, "rename", errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(path, "close", errno);
  // The rename is durable once the directory is.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string temporary_prefix(const std::string& path) { return prefix_for(resolve_links(path)); }

}  // namespace memgrad
