// Runs the `kestrel` program for end-to-end tests: exit code, stdout and stderr of one command line
// (arguments are passed through the shell), and per-test temporary names.
#pragma once
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kestrel_paths.hpp"

namespace kestrel::test {

struct CliRun {
  int code;
  std::string out, err;
};

// A name unique to this process and test: stem_PID_TestName.
inline std::string fmt_name(const char* stem) {
  return std::string(stem) + "_" + std::to_string(::getpid()) + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// A fresh, empty directory named fmt_name(stem) in the system's temporary directory.
inline std::filesystem::path temp_dir(const char* stem) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / fmt_name(stem);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Runs `kestrel ARGS` (ARGS through /bin/sh; a signal-killed run gets code 128 + signal).
inline CliRun run(const std::string& args, const std::string& prefix = "") {
  const std::filesystem::path err = std::filesystem::temp_directory_path() / fmt_name("kestrel_err");
  const std::string cmd = prefix + std::string(KESTREL_CLI) + " " + args + " 2>" + err.string();
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  std::ifstream f(err);
  std::stringstream es;
  es << f.rdbuf();
  std::filesystem::remove(err);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out, es.str()};
}

}  // namespace kestrel::test
