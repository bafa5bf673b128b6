// Conversions between NumPy/Python values and the library's types, shared by the binding files (bind_*.cpp).
// Copies: an F-contiguous float64 input is viewed in place (arma::mat over the NumPy buffer, no copy); any other
// array-like is copied once into Fortran order. Results are moved into a heap arma::mat owned by a capsule that is
// the base of the returned array (no copy).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <armadillo>

#include "analysis/montecarlo.hpp"
#include "analysis/pairwise.hpp"
#include "args.hpp"
#include "data/regimes.hpp"
#include "estimators/estimator.hpp"
#include "kernels/kernel.hpp"

namespace kestrel::python {

namespace py = pybind11;

using FArray = py::array_t<double, py::array::f_style | py::array::forcecast>;

// A d x L matrix over a NumPy array: in place when the array is F-contiguous float64, else over a
// Fortran-order copy that this object keeps alive. Build it with the GIL held; use it without.
struct MatIn {
  py::array keep;
  std::optional<arma::mat> m;
  const arma::mat& operator*() const { return *m; }
  const arma::mat* operator->() const { return &*m; }
};

// layout is what a 2-D array means to the caller, for the error on another number of dimensions.
MatIn mat_in(const py::handle& obj, const char* name, const char* layout = "d x L, points are columns");
// Moves m to the heap; the returned array views its memory and owns it through a capsule.
py::array mat_out(arma::mat&& m);
// "softmax", "gaussian", "scaled:<alpha>", or a number alpha.
Kernel kernel_of(const py::object& k);
Side side_of(const std::string& s);
// The binding is a public boundary: checks X and the draw against the estimator.
// X (d x L) for a fitted estimator: finite, with d rows; an L x d array gets an error saying to pass X.T.
void check_points(const FeatureMap& e, const arma::mat& X, const char* name);
// X has at least one point (column) and one dimension (row): "X is 4 x 0: no points (points are columns, d x L)".
void require_points(const arma::mat& X, const char* name);
void check_draw(const FeatureMap& e, const Draw& w, const arma::mat& X, const char* name);
py::object from_json(const nlohmann::json& j);
py::dict moments_dict(EntryMoments&& m);
// rows= of the per-row exact quantities (Estimator.kc_variance, predict_attention) for L query rows: None or 'all'
// (every row: empty result), an integer n (n rows sampled with seed, analysis/row_sample.hpp), or a 1-D array of
// distinct integer indices. A ValueError names any other value (0, negative, > L, non-integer, repeated index).
arma::uvec rows_in(const py::object& rows, std::uint64_t seed, arma::uword L);
// The rows used (0..L-1 when rows is empty) as an int64 array.
py::array rows_out(const arma::uvec& rows, arma::uword L);
// A zero-copy read/write view of a member matrix of a Python-owned object (the object is the base).
py::array member_view(const arma::mat& m, py::handle owner);
py::array member_view(const arma::rowvec& v, py::handle owner);
// log Var of pairs where the estimator is exact is -inf: a summary over pairs that are all exact has mean -inf
// (and n_exact = n_pairs), never the 0.0 of an empty mean.
py::dict summary_dict(const PairwiseSummary& s);

// progress=True of the long-running functions (sweep, advise, reproduce): a callback writing each progress line to
// sys.stderr (taking the GIL); empty (nothing printed) unless show. pop_progress takes the keyword out of kwargs.
std::function<void(const std::string&)> stderr_progress(bool show);
bool pop_progress(py::kwargs& kw);
// A flag keyword taken out of kwargs (False when absent): force= of kestrel.sweep.
bool pop_flag(py::kwargs& kw, const char* name);

// The binding of each area (bind_*.cpp), called by PYBIND11_MODULE in kestrel_py.cpp.
void bind_estimators(py::module_& m);
void bind_kernels(py::module_& m);  // kernels and the Monte Carlo simulator
void bind_data(py::module_& m);
void bind_study(py::module_& m);
void bind_reproduce(py::module_& m);
void bind_custom(py::module_& m);  // estimators written in Python (kestrel.custom)
void bind_tasks(py::module_& m);   // classification and attention for any registered estimator

}  // namespace kestrel::python
