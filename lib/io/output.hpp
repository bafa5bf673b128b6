// Safe outputs: an output is a new path or, with --force, an existing regular file in a writable
// directory (checked before any computing); temporary files are removed on SIGINT/SIGTERM; a lock
// makes a second writer of the same output fail at once.
#pragma once
#include <string>
#include <vector>

namespace kestrel {

// Throws InvalidArgument naming the path unless it can be written: its directory exists and is
// writable, and it does not exist, or exists as a regular file (or a link to one) and force is set.
// Directories, devices, FIFOs and sockets are refused even with force.
void check_output(const std::string& path, bool force);

// Temporary files registered here are unlinked if the process gets SIGINT or SIGTERM (the handler
// then re-raises the signal with its default action). install_cleanup_on_signals() is called once by
// the command line; a library user (Python) keeps its own handlers.
void register_temp_file(const std::string& path);
void unregister_temp_file(const std::string& path);
void install_cleanup_on_signals();

// An exclusive advisory lock (flock) on `path` (created if missing) for this object's lifetime;
// throws IoError naming `what` and the holder's pid if another process holds it.
class OutputLock {
 public:
  OutputLock(const std::string& path, const std::string& what);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  int fd_ = -1;
};

// Runs a program with these arguments and no shell (argv[0] is its path), waits, and returns its exit status (-1 if it
// could not be started or was killed): paths with quotes or shell syntax stay plain arguments.
int run_program(const std::vector<std::string>& argv);

}  // namespace kestrel
