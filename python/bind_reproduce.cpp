// Python bindings of the paper reproductions: kestrel.experiments and kestrel.reproduce (as `kestrel reproduce`).
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "convert.hpp"
#include "core/error.hpp"
#include "experiment.hpp"

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
      "reproduce",
      [](const Str<"name">& name, const Str<"out">& out, Bool<"quick"> quick, Int<"seed", 0, INT64_MAX> seed,
         const Str<"data_dir">& data_dir, const Str<"preprocess">& preprocess, const Str<"protocol">& protocol,
         Bool<"force"> force, Bool<"progress"> progress) {
        const auto& e = experiments::find_experiment(name);
        experiments::Options o;
        o.quick = quick, o.seed = seed, o.replace = force;
        o.progress = stderr_progress(progress);
        o.regime_options.data_dir = data_dir.value;
        o.regime_options.preprocess = parse_preprocess(preprocess);
        o.protocol = protocol.value;
        experiments::resolve_protocol(e, protocol);  // before any file is written
        experiments::check_outputs(out, {&e}, force);
        const std::string cmd =
            fmt::format("python: kestrel.reproduce('{}', '{}', quick={}, seed={}, protocol='{}')", name.value,
                        out.value, quick ? "True" : "False", seed.value, protocol.value);
        nlohmann::json claims = nlohmann::json::array();
        {
          py::gil_scoped_release nogil;
          for (const auto& c : experiments::reproduce(e, o, out, cmd))
            claims.push_back(experiments::to_summary_json(c));
        }
        return from_json(claims);
      },
      py::arg("name"), py::arg("out"), py::arg("quick") = false, py::arg("seed") = 1, py::arg("data_dir") = "",
      py::arg("preprocess") = "raw", py::arg("protocol") = "", py::arg("force") = false, py::arg("progress") = false,
      "Runs one reproduction into directory `out` (NAME.h5, NAME.claims.json/.md, NAME.png) and returns its claims; "
      "existing outputs are replaced only with force=True; progress=True prints the command line's progress lines on "
      "sys.stderr");
}

}  // namespace kestrel::python
