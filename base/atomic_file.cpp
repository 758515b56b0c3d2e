// Atomic file replacement: temporary file, fsync, rename, fsync of the directory.
#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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
  std::string tmp = (dir / ".memgrad-XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, fmt::format("creating a temporary file in '{}'", dir.string()), errno);
  try {
    write_all(fd, bytes, path);
    if (::fchmod(fd, mode_for(target)) != 0) fail(path, "fchmod", errno);
    if (::fsync(fd) != 0) fail(path, "fsync", errno);
    if (::close(fd) != 0) fail(path, "close", errno);
  } catch (...) {
    ::close(fd);  // a second close after a failed one only returns EBADF
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail(path, "rename", error);
  }
  // The rename is durable once the directory is.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace memgrad
