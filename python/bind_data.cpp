// Python bindings of the data: regimes, kestrel.draw_regime, points files and the data directory.
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "convert.hpp"
#include "core/error.hpp"
#include "data/catalog.hpp"
#include "data/points_file.hpp"
#include "data/regimes.hpp"

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
      "draw_regime",
      [](const std::string& name, arma::uword d, arma::uword L, double sigma, std::uint64_t seed,
         std::uint64_t pair_index, const std::string& data_dir, const std::string& preprocess,
         const std::string& spectrum, arma::uword clusters, double cluster_radius, const std::string& x_file,
         const std::string& y_file) {
        validate_regime(name);
        require(std::isfinite(sigma) && sigma > 0, "sigma must be > 0, got {}", sigma);
        const RegimeOptions o =
            regime_options(data_dir, preprocess, spectrum, clusters, cluster_radius, x_file, y_file);
        SetPair sp;
        {
          py::gil_scoped_release nogil;
          sp = draw_regime(name, d, L, sigma, seed, pair_index, o);
        }
        return py::make_tuple(mat_out(std::move(sp.X)), mat_out(std::move(sp.Y)));
      },
      py::arg("name"), py::arg("d"), py::arg("L"), py::arg("sigma"), py::arg("seed") = 1, py::arg("pair_index") = 0,
      py::arg("data_dir") = "", py::arg("preprocess") = "raw", py::arg("spectrum") = "geometric:100",
      py::arg("clusters") = 2, py::arg("cluster_radius") = 1.0, py::arg("x_file") = "", py::arg("y_file") = "",
      kRegimeDoc);
  m.def(
      "load_points_file", [](const std::string& path) { return mat_out(load_points_file(path)); }, py::arg("path"),
      "Points from a numeric text file (one point per row, comma or whitespace separated): d x n");
  m.def("default_data_dir", &default_data_dir, "$KESTREL_DATA_DIR or the repository's datasets/");
}

}  // namespace kestrel::python
