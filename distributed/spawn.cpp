// spawn_ranks: posix_spawn of /proc/self/exe per rank, one pipe per rank for its output, and a
// poll loop that reads the pipes, reaps the ranks and stops them on a failure or the timeout.
#include "distributed/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "distributed/error.h"
#include "distributed/failure_note.h"

extern char** environ;

namespace memgrad::distributed {
namespace {

struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // read end of the rank's output pipe, -1 once closed
  bool running = false;
};

std::string self_executable() {
  char path[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    throw DistributedError(
        fmt::format("[spawn] cannot find this program: {}", std::strerror(errno)), "spawn", -1);
  }
  return std::string(path, static_cast<size_t>(n));
}

// This process's environment, without the variables a rank gets its own value of.
std::vector<std::string> base_environment(const std::vector<std::string>& replaced) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool drop = false;
    for (const std::string& r : replaced) drop = drop || r == name;
    if (!drop) env.push_back(entry);
  }
  return env;
}

pid_t start_rank(const std::string& program, const std::vector<std::string>& args,
                 const std::vector<std::string>& env, int out_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDERR_FILENO);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw DistributedError(fmt::format("[spawn] cannot start {}: {}", program, std::strerror(rc)),
                           "spawn", -1);
  }
  return pid;
}

// Reads what is available on each open pipe (waiting up to `wait_ms` for something).
void drain(std::vector<Child>& children, std::vector<RankOutcome>& ranks, int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<size_t> owner;
  for (size_t r = 0; r < children.size(); ++r) {
    if (children[r].out_fd >= 0) {
      fds.push_back({children[r].out_fd, POLLIN, 0});
      owner.push_back(r);
    }
  }
  if (fds.empty()) return;
  if (poll(fds.data(), fds.size(), wait_ms) <= 0) return;
  char buffer[4096];
  for (size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
    if (n > 0) {
      ranks[owner[i]].output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close(fds[i].fd);
      children[owner[i]].out_fd = -1;
    }
  }
}

void signal_running(std::vector<Child>& children, std::vector<RankOutcome>& ranks, int sig) {
  for (size_t r = 0; r < children.size(); ++r) {
    if (children[r].running) {
      kill(children[r].pid, sig);
      ranks[r].stopped = true;
    }
  }
}

}  // namespace

std::string SpawnResult::describe_failure() const {
  if (timed_out) return "timed out";
  if (first_failed_rank < 0) return "no rank failed";
  const RankOutcome& r = ranks[static_cast<size_t>(first_failed_rank)];
  if (r.signal != 0) return fmt::format("rank {} was killed by signal {}", r.rank, r.signal);
  return fmt::format("rank {} exited with status {}", r.rank, r.exit_status);
}

SpawnResult spawn_ranks(int world_size, const SpawnOptions& options) {
  if (world_size < 1) {
    throw DistributedError(fmt::format("[spawn] {} ranks", world_size), "spawn", -1);
  }
  const std::string program = self_executable();
  std::string store_dir =
      (std::filesystem::temp_directory_path() / "memgrad-store-XXXXXX").string();
  if (mkdtemp(store_dir.data()) == nullptr) {
    throw DistributedError(
        fmt::format("[spawn] cannot make a store folder: {}", std::strerror(errno)), "spawn", -1);
  }
  std::vector<std::string> replaced = {"RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "MEMGRAD_STORE_PATH",
                                       kErrorFileVariable};
  for (const auto& [name, value] : options.env) replaced.push_back(name);
  const std::vector<std::string> base = base_environment(replaced);
  const bool omp_set = std::getenv("OMP_NUM_THREADS") != nullptr;
  auto error_file = [&](int r) { return fmt::format("{}/rank-{}.error", store_dir, r); };

  SpawnResult result;
  result.ranks.resize(static_cast<size_t>(world_size));
  std::vector<Child> children(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    std::vector<std::string> env = base;
    env.push_back(fmt::format("RANK={}", r));
    env.push_back(fmt::format("LOCAL_RANK={}", r));
    env.push_back(fmt::format("WORLD_SIZE={}", world_size));
    env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", world_size));
    env.push_back("MEMGRAD_STORE_PATH=" + store_dir);
    env.push_back(fmt::format("{}={}", kErrorFileVariable, error_file(r)));
    bool omp_given = omp_set;
    for (const auto& [name, value] : options.env) {
      env.push_back(name + "=" + value);
      omp_given = omp_given || name == "OMP_NUM_THREADS";
    }
    if (!omp_given) env.push_back("OMP_NUM_THREADS=1");
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      signal_running(children, result.ranks, SIGKILL);
      throw DistributedError(fmt::format("[spawn] pipe: {}", std::strerror(errno)), "spawn", -1);
    }
    Child& c = children[static_cast<size_t>(r)];
    c.pid = start_rank(program, options.args, env, fds[1]);
    close(fds[1]);
    c.out_fd = fds[0];
    c.running = true;
    result.ranks[static_cast<size_t>(r)].rank = r;
  }

  const auto start = std::chrono::steady_clock::now();
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  auto all_exited = std::chrono::steady_clock::time_point::max();
  size_t running = children.size();
  auto pipes_open = [&] {
    return std::any_of(children.begin(), children.end(),
                       [](const Child& c) { return c.out_fd >= 0; });
  };
  // Reaps rank r if it has ended; true when this call reaped it.
  auto reap = [&](size_t r) {
    Child& c = children[r];
    int status = 0;
    if (!c.running || waitpid(c.pid, &status, WNOHANG) != c.pid) return false;
    c.running = false;
    if (--running == 0) all_exited = std::chrono::steady_clock::now();
    RankOutcome& o = result.ranks[r];
    if (WIFEXITED(status)) o.exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
    return true;
  };
  while (running > 0 || pipes_open()) {
    if (running == 0 && std::chrono::steady_clock::now() - all_exited > std::chrono::seconds(1)) {
      // A process a rank started may hold its pipe open: do not wait for it.
      for (Child& c : children) {
        if (c.out_fd >= 0) close(c.out_fd);
        c.out_fd = -1;
      }
      break;
    }
    drain(children, result.ranks, 20);
    for (size_t r = 0; r < children.size(); ++r) {
      if (!reap(r)) continue;
      const RankOutcome& o = result.ranks[r];
      if (o.exit_status != 0 && !o.stopped && result.first_failed_rank < 0 && !result.timed_out) {
        // This rank may have failed only because another had exited: name that one. A rank
        // found exited is gone or a moment from it, so waiting for it costs nothing.
        result.first_failed_rank =
            root_failure(static_cast<int>(r), world_size, error_file, [&](int g) {
              const auto gi = static_cast<size_t>(g);
              const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
              while (!reap(gi) && children[gi].running && std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
              return children[gi].running ? 0 : result.ranks[gi].exit_status;
            });
        if (options.stop_others_on_failure) {
          signal_running(children, result.ranks, SIGTERM);
          kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        }
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (!result.timed_out && running > 0 && now - start > options.timeout) {
      result.timed_out = true;
      signal_running(children, result.ranks, SIGTERM);
      kill_deadline = now + std::chrono::seconds(2);
    }
    if (running > 0 && now > kill_deadline) signal_running(children, result.ranks, SIGKILL);
  }
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  return result;
}

}  // namespace memgrad::distributed
