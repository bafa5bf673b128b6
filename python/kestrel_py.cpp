// Python bindings (pybind11) of kestrel: the compiled module kestrel._kestrel (re-exported by python/kestrel/
// __init__.py), its error mapping, and one bind_* call per area: estimators
// (bind_estimators.cpp), kernels and Monte Carlo (bind_kernels.cpp), data (bind_data.cpp), the studies of
// `kestrel variance` / `kestrel sweep` (bind_study.cpp), the reproductions (bind_reproduce.cpp) and estimators written
// in Python (bind_custom.cpp). Points are
// columns (d x L) as in the library; conversions in convert.hpp. Long computations release the GIL.
#include <cctype>
#include <cstdint>
#include <memory>
#include <string>

#include <oneapi/tbb/global_control.h>

#include <pybind11/pybind11.h>

#include "bind_options.hpp"
#include "convert.hpp"
#include "core/blas_core.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "entry_points.hpp"
#include "io/hdf5.hpp"
#include "io/provenance.hpp"

using namespace kestrel;
using namespace kestrel::python;

namespace {

// The library's messages name options as the command line spells them: in Python, "--force" is the keyword force=True
// and "--mc-points" the keyword mc_points (an option starts a word: a path such as /tmp/a--b is kept). A command in
// backticks (`kestrel sweep merge --force OUT`) is a shell command, kept as written.
std::string python_spelling(const std::string& m) {
  std::string out;
  bool in_command = false;
  for (std::size_t i = 0; i < m.size();) {
    if (m[i] == '`') in_command = !in_command;
    const bool starts_word = i == 0 || m[i - 1] == ' ' || m[i - 1] == '\'' || m[i - 1] == '(' || m[i - 1] == '`';
    if (in_command || !starts_word || m.compare(i, 2, "--") != 0 || i + 2 >= m.size() ||
        !std::islower(static_cast<unsigned char>(m[i + 2]))) {
      out += m[i++];
      continue;
    }
    std::size_t j = i + 2;
    std::string name;
    while (j < m.size() && (std::islower(static_cast<unsigned char>(m[j])) ||
                            std::isdigit(static_cast<unsigned char>(m[j])) || m[j] == '-'))
      name += m[j] == '-' ? '_' : m[j], ++j;
    while (!name.empty() && name.back() == '_') name.pop_back(), --j;  // "--sigma-" keeps its dash
    out += name == "force" ? "force=True" : name;
    i = j;
  }
  return out;
}

// kestrel's exceptions as Python's: InvalidArgument -> ValueError, NumericalError -> ArithmeticError, IoError ->
// OSError, and a points file or config that cannot be read or is malformed is the caller's invalid input (the command
// line exits 2) and an I/O failure at once: kestrel.InputFileError is both a ValueError and an OSError.
void bind_errors(py::module_& m) {
  static py::handle input_file_error =
      py::module_::import("builtins")
          .attr("type")("InputFileError", py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_OSError)),
                        py::dict(py::arg("__module__") = "kestrel",
                                 py::arg("__doc__") = "A named input file cannot be read or is malformed: a "
                                                      "ValueError (invalid input) and an OSError (I/O)"))
          .release();
  m.attr("InputFileError") = input_file_error;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputFileError& e) {
      PyErr_SetString(input_file_error.ptr(), python_spelling(e.what()).c_str());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, python_spelling(e.what()).c_str());
    } catch (const NumericalError& e) {
      PyErr_SetString(PyExc_ArithmeticError, python_spelling(e.what()).c_str());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, python_spelling(e.what()).c_str());
    }
  });
}

// What kestrel declares once: its entry points (experiments/entry_points.hpp) and the schemas of its outputs
// (core/schema.hpp), with the readers' schema check.
void bind_declarations(py::module_& m) {
  m.def(
      "_entry_points",
      [] {
        py::list out;
        const auto inputs = [](const std::vector<EntryInput>& in) {
          py::list l;
          for (const auto& i : in) {
            py::dict d;
            d["name"] = i.python, d["cli"] = i.cli, d["help"] = i.help, d["type"] = i.type;
            d["default"] = i.default_value ? py::object(py::str(i.default_value)) : py::object(py::none());
            l.append(d);
          }
          return l;
        };
        for (const auto& e : entry_points()) {
          py::dict d;
          d["cli"] = e.cli, d["python"] = e.python, d["help"] = e.help, d["returns"] = e.returns, d["plot"] = e.plot;
          d["inputs"] = inputs(e.inputs), d["keywords"] = inputs(e.keywords);
          d["options"] = e.options ? options_list(e.options()) : py::list();
          py::list writes;
          for (Output o : e.writes) writes.append(schema_of(o).name);
          d["writes"] = writes;
          out.append(d);
        }
        return out;
      },
      "kestrel's entry points as declared once (experiments/entry_points.hpp): command-line and Python names, help, "
      "inputs, keywords, options, return type, the schemas of what each writes, and its plot module");
  m.def(
      "schemas",
      [] {
        nlohmann::json out = nlohmann::json::array();
        for (const Schema& s : schemas())
          out.push_back({{"name", s.name}, {"version", version_text(s)}, {"what", s.what}});
        return from_json(out);
      },
      "What kestrel's outputs say they are: each schema's name, version (MAJOR.MINOR) and the files and reports that "
      "carry it (as `schema` and `schema_version`)");
  m.def("_check_schema", &check_schema, py::arg("source"), py::arg("name"), py::arg("version"),
        "Raises kestrel.InputFileError if name is a kestrel schema and version's major is newer than this kestrel's "
        "(the readers' check, core/schema.hpp)");
}

}  // namespace

PYBIND11_MODULE(_kestrel, m) {
  m.doc() =
      "kestrel: exact variances, Monte Carlo and parameter fitting for random-feature estimators of the softmax "
      "and Gaussian kernels. Points are columns: a set of L points in R^d is a d x L float64 array (Fortran order "
      "is used without copying). Logs are natural logs. See README 'Python'.";
  m.attr("__version__") = kestrel_version();
  // As the CLI: OpenBLAS single-threaded (TBB parallelises around it), so results equal the CLI's bit for bit
  // (multi-threaded OpenBLAS rounds differently with the thread count). This also applies to NumPy when it shares
  // the OpenBLAS library; OPENBLAS_NUM_THREADS set before the import keeps its value.
  kestrel::single_threaded_blas();
  // kestrel/__init__.py set OPENBLAS_CORETYPE (kestrel._blas_core) before this module loaded OpenBLAS; an OpenBLAS
  // loaded earlier (by NumPy) kept its own choice, which on a CPU it could not identify is its generic kernels.
  if (const std::string w = openblas_core_warning();
      !w.empty() && PyErr_WarnEx(PyExc_RuntimeWarning, w.c_str(), 1) != 0)
    throw py::error_already_set();

  bind_errors(m);

  // Hooks for the tests of the conversions and the error mapping (not part of the documented API).
  m.def(
      "_input_address",
      [](const py::object& X) -> std::uintptr_t {
        const MatIn x = mat_in(X, "X");
        return reinterpret_cast<std::uintptr_t>(x->memptr());
      },
      "Address of the buffer the library sees for X (equal to X.ctypes.data when X is used without a copy)");
  m.def("_raise", [](const std::string& kind, const std::string& message) {
    if (kind == "invalid") throw InvalidArgument(message);
    if (kind == "numerical") throw NumericalError(message);
    if (kind == "io") throw IoError(message);
    if (kind == "input-file") throw InputFileError(message);
    throw InvalidArgument(fmt::format("unknown error kind '{}'", kind));
  });

  m.def(
      "versions",
      [] {
        return from_json({{"kestrel", kestrel_version()},
                          {"git_revision", git_revision()},
                          {"libraries", nlohmann::json::parse(library_versions())}});
      },
      "The kestrel version, the git revision it was built from and the versions of the libraries it was built with");
  bind_declarations(m);
  m.def(
      "set_threads",
      [](Int<"n", 0, 4096> n) {
        // One limit for the whole process, as the CLI's --threads; results do not depend on it (fixed blocks).
        static std::unique_ptr<tbb::global_control> limit;
        limit.reset();
        if (n > 0) limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n.value);
      },
      py::arg("n"),
      "Limits kestrel to n threads (an integer in [0, 4096]; 0: all cores, the default), as the command line's "
      "--threads. Results are "
      "identical for any thread count.");
  m.def(
      "threads", [] { return tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism); },
      "The number of threads kestrel uses");

  bind_estimators(m);
  bind_kernels(m);
  bind_data(m);
  bind_study(m);
  bind_reproduce(m);
  bind_tasks(m);
  bind_custom(m);
}
