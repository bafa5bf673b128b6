// kestrel's entry points, declared once (issue 69 item 1): each one's command-line name, its Python function, one line
// of help, its inputs and the keywords it takes beyond its options, its options (from its option table), what it
// writes (the schemas of core/schema.hpp) and the module that draws its plot. The command line's list of subcommands
// (apps/kestrel/main.cpp), the Python signatures and option tables (kestrel/__init__.py via _entry_points), the type
// stubs (kestrel/__init__.pyi) and the docs' list of entry points are generated from this table. It lives beside the
// reproductions because both front-ends link this library and the reproductions' option table is here.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/schema.hpp"
#include "frontend/option_table.hpp"

namespace kestrel {

// An input the caller names: positional in Python, an option on the command line ("" where a front-end lacks it).
struct EntryInput {
  const char* python;  // "Q"
  const char* cli;     // "queries" (--queries)
  const char* help;
  const char* type;                     // its Python type in the stubs ("ArrayLike", "str", "os.PathLike | str")
  const char* default_value = nullptr;  // Python's default ("None"); nullptr: required
};

struct EntryPoint {
  const char* cli;     // the subcommand ("" for a Python function only)
  const char* python;  // the function of the kestrel package ("" for a command only)
  const char* help;    // one line
  std::vector<EntryInput> inputs = {};
  std::vector<EntryInput> keywords = {};           // Python keywords beyond the options (progress, out, force)
  std::vector<OptionInfo> (*options)() = nullptr;  // its option table as the Python function takes it; nullptr: none
  const char* returns = "None";                    // its Python return type in the stubs
  std::vector<Output> writes = {};                 // the schemas of the files and reports it writes
  const char* plot = "";                           // the module of the kestrel package that draws its figure ("" none)
};

const std::vector<EntryPoint>& entry_points();
// The entry point of that command-line or Python name; std::logic_error if none (a front-end that lost its table).
const EntryPoint& entry_point(std::string_view name);

}  // namespace kestrel
