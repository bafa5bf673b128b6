// Python bindings of the paper reproductions: kestrel.experiments and kestrel.reproduce (as `kestrel reproduce`, its
// keywords from the same option table, experiments/reproduce_options.hpp).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind_options.hpp"
#include "convert.hpp"
#include "core/error.hpp"
#include "experiment.hpp"
#include "reproduce_options.hpp"

namespace kestrel::python {

void bind_reproduce(py::module_& m) {
  m.def(
      "experiments",
      [] {
        py::dict d;
        for (const auto& e : experiments::all_experiments()) d[py::str(e.name)] = e.title;
        return d;
      },
      "The reproductions (as `kestrel reproduce`) with their titles");
  m.def(
      "_reproduce_options", [] { return options_list(describe(experiments::reproduce_option_table(), {})); },
      "The option table of reproduce (name, kind, list, default, help), for the signature");
  m.def(
      "reproduce",
      [](const Str<"name">& name, const Str<"out">& out, py::kwargs kw) {
        const bool show = pop_progress(kw);
        experiments::Options o;
        const auto todo = experiments::reproduction_request(
            name, values_from_kwargs(kw, experiments::reproduce_option_table(), "reproduce"),
            o);  // before any file is written
        o.progress = stderr_progress(show);
        experiments::check_outputs(out, todo, o.replace);
        const std::string cmd = call_text("reproduce", kw,
                                          fmt::format("{}, {}", py::repr(py::str(name.value)).cast<std::string>(),
                                                      py::repr(py::str(out.value)).cast<std::string>()));
        py::list all;
        {
          py::gil_scoped_release nogil;
          for (const auto* e : todo) {
            nlohmann::json claims = nlohmann::json::array();
            for (const auto& c : experiments::reproduce(*e, o, out, cmd))
              claims.push_back(experiments::to_summary_json(c));
            py::gil_scoped_acquire gil;
            all.append(from_json(claims));
          }
        }
        return todo.size() == 1 ? py::object(all[0]) : py::object(all);
      },
      py::arg("name"), py::arg("out"),
      ("Runs one reproduction (or all: a list of claims per reproduction) into directory `out` (NAME.h5, "
       "NAME.claims.json/.md, NAME.png) and returns its claims; the options of `kestrel reproduce` as keywords (same "
       "names with '_' for '-'); existing outputs are replaced only with force=True; progress=True prints the command "
       "line's progress lines on sys.stderr. Options:" +
       options_doc(describe(experiments::reproduce_option_table(), {})))
          .c_str());
}

}  // namespace kestrel::python
