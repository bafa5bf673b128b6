// Python bindings of the studies: kestrel.variance_study(**options) and kestrel.sweep(out, **options) take the
// options of `kestrel variance` / `kestrel sweep` by the same names ('-' written '_': halve_real, mc_points)
// from the one table in lib/frontend/study_options.hpp, so names, defaults and validation equal the command line's.
// An unknown keyword is a TypeError naming the nearest option; a bad value a ValueError naming it.
#include <algorithm>
#include <functional>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/sweep.hpp"
#include "convert.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "frontend/advise_options.hpp"
#include "frontend/study_options.hpp"
#include "io/provenance.hpp"
#include "tasks/advise.hpp"

namespace py = pybind11;
using namespace kestrel;

namespace {

std::string py_name(std::string n) {
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// One Python value as the text the command line would carry (an option of either table: StudyOption, AdviseOption).
template <typename Option>
std::string scalar_text(const py::handle& v, const Option& o, const std::string& where) {
  const char* want = o.kind == OptionKind::Integer ? "an integer"
                     : o.kind == OptionKind::Real  ? "a number"
                     : o.kind == OptionKind::Flag  ? "True or False"
                                                   : "a string";
  const std::string got = py::repr(v).cast<std::string>();
  if (py::isinstance<py::bool_>(v)) {
    require(o.kind == OptionKind::Flag, "{}: expected {}, got {}", where, want, got);
    return v.cast<bool>() ? "true" : "false";
  }
  if (py::isinstance<py::str>(v)) {
    require(o.kind == OptionKind::Text, "{}: expected {}, got the string {}", where, want, got);
    return v.cast<std::string>();
  }
  if (py::hasattr(v, "__index__") && o.kind != OptionKind::Flag) {  // int, numpy integers
    if (o.name == "kernel") return "scaled:" + py::str(v.attr("__index__")()).cast<std::string>();
    require(o.kind != OptionKind::Text, "{}: expected {}, got {}", where, want, got);
    return py::str(v.attr("__index__")()).cast<std::string>();
  }
  if (py::hasattr(v, "__float__") && o.kind != OptionKind::Flag) {  // float, numpy floats
    const std::string r = py::repr(py::float_(py::reinterpret_borrow<py::object>(v))).cast<std::string>();
    if (o.name == "kernel") return "scaled:" + r;
    require(o.kind == OptionKind::Real, "{}: expected {}, got {}", where, want, got);
    return r;
  }
  throw InvalidArgument(fmt::format("{}: expected {}, got {}", where, want, got));
}

StudyValues values_from_kwargs(const py::kwargs& kw, StudyCommand c, const char* function) {
  StudyValues v;
  std::vector<std::string> names;
  for (const auto& n : study_option_names()) names.push_back(py_name(n));
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    std::string name = k;
    std::replace(name.begin(), name.end(), '_', '-');
    const StudyOption* opt = nullptr;
    for (const auto& o : study_options())
      if (o.name == name) opt = &o;
    if (!opt || k.find('-') != std::string::npos)
      throw py::type_error(
          fmt::format("{}() got an unexpected keyword argument '{}'{}", function, k, did_you_mean(k, names)));
    const std::string where = k;
    std::string text;
    const bool sequence =
        py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value) ||
        (py::hasattr(value, "ndim") && py::hasattr(value, "tolist") && py::getattr(value, "ndim").cast<int>() > 0);
    if (sequence) {
      require(takes_list(*opt, c), "{}: takes one value in kestrel.{}(), got a list", where, function);
      const py::object obj = py::reinterpret_borrow<py::object>(value);
      const py::list items =
          py::hasattr(obj, "tolist") && !py::isinstance<py::list>(obj) ? py::list(obj.attr("tolist")()) : py::list(obj);
      require(!items.empty(), "{}: the list is empty", where);
      for (const auto& item : items) {
        const std::string s = scalar_text(item, *opt, where);
        require(s.find(',') == std::string::npos, "{}: list items must not contain ',', got '{}'", where, s);
        text += (text.empty() ? "" : ",") + s;
      }
    } else {
      text = scalar_text(value, *opt, where);
    }
    v[name] = {text, where};
  }
  return v;
}

// kestrel.advise's keywords through `kestrel advise`'s table (frontend/advise_options.hpp); lists for estimators,
// samplers.
StudyValues advise_values(const py::kwargs& kw) {
  StudyValues v;
  std::vector<std::string> names;
  for (const auto& o : advise_options()) names.push_back(py_name(o.name));
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    std::string name = k;
    std::replace(name.begin(), name.end(), '_', '-');
    const AdviseOption* opt = nullptr;
    for (const auto& o : advise_options())
      if (o.name == name) opt = &o;
    if (!opt || k.find('-') != std::string::npos)
      throw py::type_error(
          fmt::format("advise() got an unexpected keyword argument '{}'{}", k, did_you_mean(k, names)));
    std::string text;
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      require(name == "estimators" || name == "samplers", "{}: takes one value, got a list", k);
      for (const auto& item : value.cast<py::list>()) text += (text.empty() ? "" : ",") + scalar_text(item, *opt, k);
      require(!text.empty(), "{}: the list is empty", k);
    } else {
      text = scalar_text(value, *opt, k);
    }
    v[name] = {text, k};
  }
  return v;
}

std::string advise_doc() {
  std::string s;
  const AdviseOptions d;
  for (const auto& o : advise_options())
    s += fmt::format("\n  {} (default {}): {}", py_name(o.name), o.show(d), o.help);
  return s;
}

std::string call_text(const char* function, const py::kwargs& kw, const std::string& first = "") {
  std::string s = fmt::format("python: kestrel.{}({}", function, first);
  for (const auto& [k, v] : kw)
    s += fmt::format("{}{}={}", s.back() == '(' ? "" : ", ", k.cast<std::string>(), py::repr(v).cast<std::string>());
  return s + ")";
}

std::string options_doc(StudyCommand c) {
  std::string s;
  const VarianceStudyOptions defaults;
  for (const auto& o : study_options()) {
    const std::string d = o.show(defaults);
    s += fmt::format("\n  {}: {}{}{}", py_name(o.name), o.help, takes_list(o, c) ? " (a list)" : "",
                     d.empty() ? "" : fmt::format(" [default {}]", d));
  }
  return s;
}

}  // namespace

void kestrel::python::bind_study(py::module_& m) {
  m.def(
      "variance_study",
      [](const py::kwargs& kw) {
        const VarianceStudyOptions o =
            variance_options(values_from_kwargs(kw, StudyCommand::Variance, "variance_study"));
        nlohmann::json results = nlohmann::json::array();
        {
          py::gil_scoped_release nogil;
          for (const auto& r : run_variance_study(o)) results.push_back(to_json(r, o));
        }
        return from_json(results);
      },
      ("`kestrel variance` as a function, with its options as keywords (same names with '_' for '-', same "
       "defaults): a list with one dict per (sigma, estimator), the `results` entries of `kestrel variance --json`. "
       "Options:" +
       options_doc(StudyCommand::Variance))
          .c_str());
  m.def(
      "sweep",
      [](const std::string& out, const py::kwargs& options) {
        // progress=True: `grid point i/N ... ETA` lines on sys.stderr, as the command line prints them.
        py::kwargs kw = options;
        const bool show = pop_progress(kw), force = pop_flag(kw, "force");
        SweepOptions o = sweep_options(values_from_kwargs(kw, StudyCommand::Sweep, "sweep"));
        o.out = out;
        o.force = force;
        validate(o);
        const nlohmann::json prov =
            provenance(call_text("sweep", kw, py::repr(py::str(out)).cast<std::string>()), to_json(o));
        nlohmann::json rows = nlohmann::json::array();
        {
          py::gil_scoped_release nogil;
          for (const auto& r : run_sweep(o, prov, stderr_progress(show)).rows) rows.push_back(sweep_json(r));
        }
        return from_json(rows);
      },
      py::arg("out"),
      ("`kestrel sweep --out OUT` as a function, with its options as keywords (lists for sigma, dim, points, "
       "features): writes OUT (resumable, extendable by grid values) and returns the `results` entries of "
       "`kestrel sweep --json`. progress=True prints `grid point i/N ... ETA` on sys.stderr; force=True (as --force) "
       "replaces an existing OUT and discards the finished points of a sweep with other options. Options:" +
       options_doc(StudyCommand::Sweep))
          .c_str());
  m.def(
      "advise",
      [](const py::object& Q, const py::object& K, const py::object& V, py::kwargs kw) {
        const bool show = pop_progress(kw);
        const AdviseOptions o = advise_options_from(advise_values(kw));
        const MatIn q = mat_in(Q, "Q"), k = mat_in(K, "K");
        arma::mat v;
        if (!V.is_none()) v = *mat_in(V, "V");
        require(q->n_cols == k->n_cols,
                "Q and K must have the same number of columns d (one token per row), got {} "
                "and {}",
                q->n_cols, k->n_cols);
        const arma::mat qt = q->t(), kt = k->t();
        nlohmann::json out;
        {
          py::gil_scoped_release nogil;
          out = to_json(advise(qt, kt, v, o, stderr_progress(show)));
        }
        out["provenance"] = provenance(call_text("advise", kw), to_json(o));
        return from_json(out);
      },
      py::arg("Q"), py::arg("K"), py::arg("V") = py::none(),
      ("`kestrel advise` as a function: Q (Lq x d), K (Lk x d) and V (Lk x dv, or None) with one token per row; "
       "options as keywords (same names with '_' for '-'). Returns the report of `kestrel advise --json` as a dict: "
       "per estimator and sampler the predicted error quantiles, the M for the target, the features' exponents per "
       "number format and, with validate=R, the measured error; the cost and the recommendation. progress=True "
       "prints the command line's progress lines on sys.stderr. Options:" +
       advise_doc())
          .c_str());
}
