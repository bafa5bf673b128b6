// Python bindings of the data: regimes, kestrel.draw_regime, points files and the data directory.
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind_options.hpp"
#include "convert.hpp"
#include "core/error.hpp"
#include "data/catalog.hpp"
#include "data/points_file.hpp"
#include "data/regimes.hpp"
#include "data/uci.hpp"
#include "frontend/regime_options.hpp"

namespace kestrel::python {

namespace {
const char* kRegimeDoc =
    "Draws the set pair (X, Y), d x L each, of a regime (kestrel.regimes(); README 'Data and regimes') from stream "
    "(seed, Data, pair_index), as `kestrel variance --regime` does.";
}  // namespace

void bind_data(py::module_& m) {
  m.def(
      "regimes", [] { return regime_names(); }, "The regime names");
  m.def(
      "_draw_regime_options", [] { return options_list(describe(draw_regime_option_table(), {})); },
      "The option table of draw_regime (name, kind, list, default, help), for the signature");
  m.def(
      "draw_regime",
      [](const Str<"name">& name, Int<"d"> d, Int<"L"> L, Real<"sigma"> sigma, const py::kwargs& kw) {
        validate_regime(name);
        require(std::isfinite(sigma.value) && sigma > 0, "sigma must be > 0, got {}", sigma.value);
        RegimeSpec spec{.name = name.value, .dim = d, .points = L, .sigma = sigma};
        apply_given(draw_regime_option_table(), values_from_kwargs(kw, draw_regime_option_table(), "draw_regime"),
                    spec);
        SetPair sp;
        {
          py::gil_scoped_release nogil;
          sp = draw_regime(spec);
        }
        return py::make_tuple(mat_out(std::move(sp.X)), mat_out(std::move(sp.Y)));
      },
      py::arg("name"), py::arg("d"), py::arg("L"), py::arg("sigma"),
      (std::string(kRegimeDoc) + " Options:" + options_doc(describe(draw_regime_option_table(), {}))).c_str());
  m.def(
      "load_points_file", [](const Str<"path">& path) { return mat_out(load_points_file(path)); }, py::arg("path"),
      "Points from a numeric text file (one point per row, comma or whitespace separated): d x n");
  m.def(
      "load_uci",
      [](const Str<"name">& name, const Str<"encoding">& encoding, const Str<"data_dir">& data_dir) {
        const UciData u =
            load_uci(data_dir.value.empty() ? default_data_dir() : data_dir.value, name, parse_encoding(encoding));
        py::dict r;
        r["data"] = mat_out(arma::mat(u.X.t()));  // n x d: rows are samples, as scikit-learn's loaders
        r["feature_names"] = u.feature_names;
        if (!u.classes.empty()) {
          py::array_t<std::int64_t> target(static_cast<py::ssize_t>(u.labels.n_elem));
          auto t = target.mutable_unchecked<1>();
          for (arma::uword i = 0; i < u.labels.n_elem; ++i) t(i) = static_cast<std::int64_t>(u.labels(i));
          r["target"] = target;
          r["target_names"] = u.classes;
        } else {
          r["target"] = mat_out(arma::mat(u.target));
          r["target"] = r["target"].attr("ravel")();
        }
        return r;
      },
      py::arg("name"), py::arg("encoding") = "onehot", py::arg("data_dir") = "",
      "A staged UCI data set (kestrel's datasets/uci, see its INDEX.txt) as scikit-learn's loaders give it: a dict "
      "with data (n x d, rows are samples, categorical attributes one-hot or ordinal), target (class index or "
      "number), feature_names and, for classification sets, target_names");
  m.def(
      "uci_sets",
      [] {
        std::vector<std::string> names;
        for (const auto& s : uci_specs()) names.push_back(s.name);
        return names;
      },
      "The names of the staged UCI data sets");
  m.def("default_data_dir", &default_data_dir, "$KESTREL_DATA_DIR or the repository's datasets/");
}

}  // namespace kestrel::python
