// Safe outputs (see output.hpp).
#include "io/output.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace kestrel {

namespace fs = std::filesystem;

InvalidArgument output_exists_error(const std::string& path) {
  return InvalidArgument(fmt::format("output '{}' exists; pass --force to replace it", path));
}

namespace {

// Creates and removes a probe file in `dir`: the one test that sees every reason a file cannot be created there
// (read-only or pseudo filesystems such as /proc, permissions, quotas), with the system's own words.
void probe_directory(const std::string& path, const fs::path& dir) {
  const std::string probe = (dir / fmt::format(".kestrel-probe{}", static_cast<long>(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EEXIST)
    throw InvalidArgument(fmt::format("cannot write output '{}': cannot create a file in '{}': {}", path, dir.string(),
                                      std::strerror(errno)));
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

}  // namespace

void check_output(const std::string& path, bool force) {
  require(!path.empty(), "an output path must not be empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    require(!S_ISDIR(st.st_mode), "output '{}' is a directory; give a file name", path);
    require(S_ISREG(st.st_mode), "refusing to write output '{}': it exists and is not a regular file", path);
    if (!force) throw output_exists_error(path);
  } else if (errno != ENOENT) {
    throw InvalidArgument(fmt::format("cannot write output '{}': {}", path, std::strerror(errno)));
  }
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (::stat(parent.c_str(), &st) != 0)
    throw InvalidArgument(fmt::format("cannot write output '{}': directory '{}' {}", path, parent.string(),
                                      errno == ENOENT ? "does not exist (No such file or directory)"
                                                      : fmt::format("cannot be used ({})", std::strerror(errno))));
  require(S_ISDIR(st.st_mode), "cannot write output '{}': '{}' is not a directory", path, parent.string());
  require(::access(parent.c_str(), W_OK | X_OK) == 0, "cannot write output '{}': directory '{}' is not writable: {}",
          path, parent.string(), std::strerror(EACCES));
  probe_directory(path, parent);
}

std::string temp_beside(const std::string& path) {
  const fs::path p(path);
  return (p.parent_path() /
          fmt::format("{}.tmp{}{}", p.stem().string(), static_cast<long>(::getpid()), p.extension().string()))
      .string();
}

void publish_output(const std::string& tmp, const std::string& path, bool replace) {
  int rc = 0;
  if (replace) {
    rc = ::rename(tmp.c_str(), path.c_str());
  } else {
    rc = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {  // a filesystem without RENAME_NOREPLACE
      rc = ::link(tmp.c_str(), path.c_str());
      if (rc == 0) ::unlink(tmp.c_str());
    }
  }
  if (rc == 0) return;
  const int err = errno;
  ::unlink(tmp.c_str());
  if (err == EEXIST) throw output_exists_error(path);
  throw IoError(fmt::format("cannot move the result into '{}': {}", path, std::strerror(err)));
}

namespace {

// Fixed slots so that the signal handler reads them without allocating or locking.
constexpr std::size_t kSlots = 64, kPathMax = 4096;
std::array<std::array<char, kPathMax>, kSlots> g_paths{};
std::array<std::atomic<bool>, kSlots> g_used{};
std::mutex g_mutex;

std::array<char, kPathMax> g_note{};
std::atomic<std::size_t> g_note_size{0};

extern "C" void cleanup_and_reraise(int sig) {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (g_used[i].load()) ::unlink(g_paths[i].data());
  if (const std::size_t n = g_note_size.load(); n > 0) {
    [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, g_note.data(), n);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void register_temp_file(const std::string& path) {
  if (path.size() >= kPathMax) return;  // not cleaned on a signal; still removed on errors
  std::lock_guard<std::mutex> lock(g_mutex);
  for (std::size_t i = 0; i < kSlots; ++i)
    if (!g_used[i].load()) {
      std::memcpy(g_paths[i].data(), path.c_str(), path.size() + 1);
      g_used[i].store(true);
      return;
    }
}

void unregister_temp_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (std::size_t i = 0; i < kSlots; ++i)
    if (g_used[i].load() && path == g_paths[i].data()) {
      g_used[i].store(false);
      return;
    }
}

void set_interrupt_note(const std::string& note) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_note_size.store(0);
  if (note.empty()) return;
  const std::string line = note.substr(0, kPathMax - 2) + "\n";
  std::memcpy(g_note.data(), line.data(), line.size());
  g_note_size.store(line.size());
}

void install_cleanup_on_signals() {
  std::signal(SIGINT, cleanup_and_reraise);
  std::signal(SIGTERM, cleanup_and_reraise);
}

OutputLock::OutputLock(const std::string& path, const std::string& what) : path_(path) {
  // The holder unlinks the lock file when it ends (also on SIGINT/SIGTERM), so no stale lock file stays behind. A
  // file locked after its holder unlinked it is not the lock any more: then try again with the file at the path.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IoError(fmt::format("cannot create lock file '{}': {}", path, std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {};
      const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      ::close(fd_);
      fd_ = -1;
      throw IoError(fmt::format("another kestrel process{} is writing {}; wait for it to finish or stop it",
                                n > 0 ? fmt::format(" (pid {})", std::string(buf, static_cast<std::size_t>(n))) : "",
                                what));
    }
    struct stat held = {};
    struct stat named = {};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt == 100) throw IoError(fmt::format("cannot lock '{}': it keeps being replaced", path));
  }
  register_temp_file(path_);
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; only the message of a second writer is less specific.
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  unregister_temp_file(path_);
  ::unlink(path_.c_str());  // while still held: a process that opened the old file sees it is gone and retries
  ::close(fd_);             // releases the flock
}

int run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace kestrel
