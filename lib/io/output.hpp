// Safe outputs: an output is a new path or, with --force, an existing regular file in a writable
// directory (checked before any computing, and again atomically when the finished file is moved into
// place); temporary files are removed on SIGINT/SIGTERM; a lock makes a second writer of the same output fail at once.
#pragma once
#include <string>
#include <vector>

#include "core/error.hpp"

namespace kestrel {

// Throws InvalidArgument naming the path and the operating system's reason unless it can be written: it is not
// empty, its directory exists and a file can be created there (tried), and it does not exist, or exists as a regular
// file (or a link to one) and force is set. Directories, devices, FIFOs and sockets are refused even with force.
void check_output(const std::string& path, bool force);

// The error of an output that exists without force ("output 'P' exists; pass --force to replace it"), the same
// whether check_output finds it before computing or publish_output when the result is moved into place.
InvalidArgument output_exists_error(const std::string& path);

// Moves the finished temporary file `tmp` (same directory) onto `path`. With replace, an atomic rename; without, an
// atomic no-replace step (renameat2 RENAME_NOREPLACE, or link + unlink where the filesystem lacks it) that throws
// output_exists_error if `path` appeared while this run was computing (another writer won). `tmp` is removed on
// failure.
void publish_output(const std::string& tmp, const std::string& path, bool replace);

// A temporary name beside `path` unique to this process: "DIR/STEM.tmpPID.EXT" (the extension is kept last, so
// programs that infer the format from it, such as matplotlib, write the right one).
std::string temp_beside(const std::string& path);

// Temporary files registered here are unlinked if the process gets SIGINT or SIGTERM (the handler
// then re-raises the signal with its default action). install_cleanup_on_signals() is called once by
// the command line; a library user (Python) keeps its own handlers.
void register_temp_file(const std::string& path);
void unregister_temp_file(const std::string& path);
void install_cleanup_on_signals();
// One line the signal handler writes to stderr after removing the temporary files (how to resume an interrupted
// sweep, say); "" clears it. Copied into fixed storage: the handler neither allocates nor locks.
void set_interrupt_note(const std::string& note);

// An exclusive advisory lock (flock) on `path` (created if missing) for this object's lifetime;
// throws IoError naming `what` and the holder's pid if another process holds it. The lock file is removed when the
// lock ends, also when SIGINT or SIGTERM ends the process (it is registered as a temporary file).
class OutputLock {
 public:
  OutputLock(const std::string& path, const std::string& what);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// Runs a program with these arguments and no shell (argv[0] is its path), waits, and returns its exit status (-1 if it
// could not be started or was killed): paths with quotes or shell syntax stay plain arguments.
int run_program(const std::vector<std::string>& argv);

}  // namespace kestrel
