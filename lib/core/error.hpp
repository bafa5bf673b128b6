// Typed errors of the library: bad input is reported with the offending value named.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace kestrel {

// Invalid input at a public boundary ("sigma must be > 0, got -1").
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An estimator that does not exist for this input by theory (DARK's Sigma* needs every eigenvalue of
// Lambda < 1/2; beyond, every Gaussian proposal has infinite expected variance). Studies record it as
// an "undefined" result; called directly it is the caller's invalid input.
class Undefined : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// A numerical failure that is not the caller's fault (a bug or an unrepresentable result).
class NumericalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// I/O failure (unwritable file, corrupt input file).
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file the user named as input cannot be read or is malformed: invalid input (the CLI exits 2), still an
// IoError for code that catches those.
class InputFileError : public IoError {
 public:
  using IoError::IoError;
};

// A result that cannot be made yet from what exists (`kestrel sweep merge` with grid points missing): the CLI exits 3,
// so a job script tells it from bad input (2) and other failures (1).
class Incomplete : public IoError {
 public:
  using IoError::IoError;
};

template <typename... Args>
void require(bool ok, fmt::format_string<Args...> f, Args&&... args) {
  if (!ok) throw InvalidArgument(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kestrel
