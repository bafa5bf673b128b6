// Python bindings of the studies: kestrel.variance_study(**options) and kestrel.sweep(out, **options) take the
// options of `kestrel variance` / `kestrel sweep` by the same names ('-' written '_': halve_real, mc_points)
// from the one table in lib/frontend/study_options.hpp, so names, defaults and validation equal the command line's.
// An unknown keyword is a TypeError naming the nearest option; a bad value a ValueError naming it.
#include <algorithm>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "analysis/sweep.hpp"
#include "bind_options.hpp"
#include "convert.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "data/points_file.hpp"
#include "frontend/advise_options.hpp"
#include "frontend/study_options.hpp"
#include "io/hdf5.hpp"
#include "io/output.hpp"
#include "io/provenance.hpp"
#include "tasks/advise/advise.hpp"
#include "tasks/advise/heads.hpp"
#include "tasks/advise/steps.hpp"
#include "tasks/learned_attention.hpp"

namespace py = pybind11;
using namespace kestrel;
using namespace kestrel::python;

namespace {

std::function<bool(const StudyOption&)> lists_of(StudyCommand c) {
  return [c](const StudyOption& o) { return takes_list(o, c); };
}

std::vector<OptionInfo> study_infos(StudyCommand c) { return describe(study_options(), lists_of(c)); }

// A UserWarning for each points file of the file regime read with fewer points than coordinates (as the command line's
// warning; layout_note in data/points_file.hpp).
void warn_layout(const VarianceStudyOptions& o) {
  if (o.regime != "file") return;
  for (const auto& f : {o.regime_options.x_file, o.regime_options.y_file})
    if (!f.empty())
      if (const std::string note = layout_note(*load_points(f)); !note.empty())
        if (PyErr_WarnEx(PyExc_UserWarning, note.c_str(), 1) != 0) throw py::error_already_set();
}

// kestrel.sweep(out, **options); progress=True: `grid point i/N ... ETA` lines on sys.stderr, as the command line
// prints them.
py::object sweep_py(const Str<"out">& out, const py::kwargs& options) {
  // progress=True: `grid point i/N ... ETA` lines on sys.stderr, as the command line prints them.
  py::kwargs kw = options;
  const bool show = pop_progress(kw), force = pop_flag(kw, "force");
  py::kwargs run;  // how this process takes part (shard=): not recorded in the call
  for (const auto& opt : sweep_run_options())
    if (kw.contains(py_name(opt.name))) run[py_name(opt.name).c_str()] = kw.attr("pop")(py_name(opt.name));
  SweepOptions o = sweep_options(values_from_kwargs(kw, study_options(), "sweep", lists_of(StudyCommand::Sweep)));
  apply_sweep_run(values_from_kwargs(run, sweep_run_options(), "sweep"), o,
                  [](const char* v) { return std::getenv(v); });
  o.out = out.value;
  o.force = force;
  validate(o);
  warn_layout(o.base);
  const nlohmann::json prov = provenance(call_text("sweep", kw, py::repr(py::str(out.value)).cast<std::string>()),
                                         o.recorded, study_inputs(o.base));
  nlohmann::json rows = nlohmann::json::array();
  {
    py::gil_scoped_release nogil;
    for (const auto& r : run_sweep(o, prov, stderr_progress(show)).rows) rows.push_back(sweep_json(r));
  }
  return from_json(rows);
}

// The keys of a report's rows, from the column table that writes them (tasks/advise/advise.hpp AdviceColumn).
std::string advice_row_doc() {
  return "\n\nEach row has estimator, sampler, status (ok, not applicable, failed) and reason or note; an ok row "
         "also:" +
         json_fields(advice_columns());
}

// A NumPy array of 2 to max_axes axes (5 with learned maps: a leading sequences axis) as stored in C order
// (tasks/advise/heads.hpp TokenArray): copied once.
TokenArray token_array(const py::object& obj, const char* name, py::ssize_t max_axes = 4) {
  using CArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
  if (const py::array probe = py::array::ensure(obj)) {  // refused as mat_in refuses them (the 2-D path)
    const char kind = probe.dtype().kind();
    require(kind != 'c',
            "{} holds complex numbers (dtype {}): kestrel takes real tokens; pass {}.real, or the real and imaginary "
            "parts as separate coordinates",
            name, py::str(probe.dtype()).cast<std::string>(), name);
    require(kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b', "{} must be an array of numbers, got dtype {}",
            name, py::str(probe.dtype()).cast<std::string>());
  }
  const CArray a = CArray::ensure(obj);
  if (!a) throw py::type_error(fmt::format("{}: expected an array of numbers", name));
  require(a.ndim() >= 2 && a.ndim() <= max_axes,
          "{}: expected [L, d], [heads, L, d] or [layers, heads, L, d]{}, got {} axes", name,
          max_axes > 4 ? " (with learned maps: a sequences axis first)" : "", a.ndim());
  TokenArray t;
  for (py::ssize_t k = 0; k < a.ndim(); ++k) t.shape.push_back(static_cast<arma::uword>(a.shape(k)));
  const arma::uword d = t.shape.back(), n = d ? static_cast<arma::uword>(a.size()) / d : 0;
  t.data = arma::mat(a.data(), d, n);  // C order: each token's d values are contiguous
  require(t.data.is_finite(), "{}: every value must be finite", name);
  return t;
}

// Arrays, nested lists and tensors (anything NumPy converts) of 3 or 4 axes, as the 2-D path takes them.
bool stacked(const py::object& obj) {
  if (obj.is_none() || py::isinstance<py::str>(obj)) return false;
  const py::array a = py::isinstance<py::array>(obj) ? py::reinterpret_borrow<py::array>(obj) : py::array::ensure(obj);
  return a && a.ndim() > 2;
}

// out=PATH of kestrel.advise (None or absent: ""), taken out of kwargs.
std::string pop_out(py::kwargs& kw) {
  if (!kw.contains("out")) return "";
  const py::object v = kw.attr("pop")("out");
  return v.is_none() ? "" : py::str(v).cast<std::string>();
}

// The report as a dict with its provenance; with out=, also the HDF5 file `kestrel advise --out` writes (the same
// writer; the plot is kestrel.advice's).
template <typename A>
py::object finish_advise(const A& adv, const AdviseOptions& o, const py::kwargs& kw, std::unique_ptr<H5Writer>& h5) {
  const nlohmann::json options = record_advise(o);
  nlohmann::json out = to_json(adv, options);
  out["provenance"] = provenance(call_text("advise", kw), options);
  stamp_schema(out, output_kind(adv));
  if (h5) {
    write_provenance(*h5, out["provenance"], output_kind(adv));
    write_report(*h5, adv, options);
    h5->commit();
  }
  return from_json(out);
}

// kestrel.advise on [heads, L, d] or [layers, heads, L, d] arrays: the report of advise_heads.
py::object advise_stacked(const py::object& Q, const py::object& K, const py::object& V, const AdviseOptions& o,
                          bool show, const py::kwargs& kw, const std::string& path, bool force) {
  const TokenArray q = token_array(Q, "Q"), k = token_array(K, "K");
  const std::optional<TokenArray> v = V.is_none() ? std::nullopt : std::optional(token_array(V, "V"));
  const HeadStack stack = stack_heads(q, k, v ? &*v : nullptr, {"Q", "K", "V"});
  std::unique_ptr<H5Writer> h5;
  if (!path.empty()) h5 = std::make_unique<H5Writer>(path, force);  // fails early on a bad or existing path
  std::optional<HeadsAdvice> adv;
  {
    py::gil_scoped_release nogil;
    adv = advise_heads(stack, o, stderr_progress(show));
  }
  return finish_advise(*adv, o, kw, h5);
}

// kestrel.advise on 2-D arrays (one token per row): the report of advise.
py::object advise_single(const py::object& Q, const py::object& K, const py::object& V, const AdviseOptions& o,
                         bool show, const py::kwargs& kw, const std::string& path, bool force) {
  const MatIn q = mat_in(Q, "Q", "Lq x d, one token per row"), k = mat_in(K, "K", "Lk x d, one token per row");
  arma::mat v;
  if (!V.is_none()) v = unit_scaled_values(*mat_in(V, "V", "Lk x dv, one row per key"));
  for (const auto& [name, m] : {std::pair{"Q", &*q}, std::pair{"K", &*k}})
    if (m->n_rows < m->n_cols &&
        PyErr_WarnEx(PyExc_UserWarning,
                     fmt::format("{} is {} x {}: read as {} tokens of dimension d = {} (one token per row); if "
                                 "its tokens are the columns, pass {}.T",
                                 name, m->n_rows, m->n_cols, m->n_rows, m->n_cols, name)
                         .c_str(),
                     1) != 0)
      throw py::error_already_set();
  require(q->n_cols == k->n_cols,
          "Q and K must have the same number of columns d (one token per row), got {} "
          "and {}",
          q->n_cols, k->n_cols);
  const arma::mat qt = q->t(), kt = k->t();
  std::unique_ptr<H5Writer> h5;
  if (!path.empty()) h5 = std::make_unique<H5Writer>(path, force);  // fails early on a bad or existing path
  std::optional<Advice> adv;
  {
    py::gil_scoped_release nogil;
    adv = advise(qt, kt, v, o, stderr_progress(show));
  }
  return finish_advise(*adv, o, kw, h5);
}

// kestrel.advise with learned= on [sequences, L, d] arrays of one head (the report of advise_sequences) or
// [sequences, (layers,) heads, L, d] (the report of advise_heads).
py::object advise_learned(const py::object& Q, const py::object& K, const py::object& V, const AdviseOptions& o,
                          bool show, const py::kwargs& kw, const std::string& path, bool force) {
  const TokenArray q = token_array(Q, "Q", 5), k = token_array(K, "K", 5);
  const std::optional<TokenArray> v = V.is_none() ? std::nullopt : std::optional(token_array(V, "V", 5));
  const HeadStack stack = stack_sequences(q, k, v ? &*v : nullptr, {"Q", "K", "V"});
  std::unique_ptr<H5Writer> h5;
  if (!path.empty()) h5 = std::make_unique<H5Writer>(path, force);
  if (q.shape.size() == 3) {
    std::optional<Advice> adv;
    {
      py::gil_scoped_release nogil;
      adv = advise_sequences(head_sequences(stack, 0), o, stderr_progress(show));
    }
    return finish_advise(*adv, o, kw, h5);
  }
  std::optional<HeadsAdvice> adv;
  {
    py::gil_scoped_release nogil;
    adv = advise_heads(stack, o, stderr_progress(show));
  }
  return finish_advise(*adv, o, kw, h5);
}

// kestrel._study_options(): the tables the Python signatures are generated from.
void bind_study_tables(py::module_& m) {
  m.def(
      "_study_options",
      [] {
        py::dict d;
        d["variance"] = options_list(study_infos(StudyCommand::Variance));
        std::vector<OptionInfo> sweep = study_infos(StudyCommand::Sweep);
        for (const auto& o : describe(sweep_run_options(), std::function<bool(const Option<SweepOptions>&)>()))
          sweep.push_back(o);
        d["sweep"] = options_list(sweep);
        d["advise"] = options_list(describe(advise_options(), std::function<bool(const AdviseOption&)>()));
        return d;
      },
      "The option tables of variance_study, sweep and advise (name, kind, list, default, help), for the signatures");
}

// The command line's output writers for the package's own files (kestrel.torch): one check of an output path, one
// atomic publish, one writer of a report file's provenance, schema and report.json.
void bind_output_files(py::module_& m) {
  m.def("_check_output", &check_output, py::arg("path"), py::arg("force"),
        "Refuses an output that cannot be written, or exists without force (io/output.hpp check_output)");
  m.def("_temp_beside", &temp_beside, py::arg("path"), "A temporary name beside path (io/output.hpp temp_beside)");
  m.def(
      "_attention_flops",
      [](double Lq, double Lk, double d, double dv, bool causal, double M) {
        return M > 0 ? advise_steps::rf_attention_flops(Lq, Lk, d, dv, M)
                     : advise_steps::exact_attention_flops(Lq, Lk, d, dv, causal);
      },
      py::arg("Lq"), py::arg("Lk"), py::arg("d"), py::arg("dv"), py::arg("causal"), py::arg("M") = 0,
      "advise's FLOPs of attention (tasks/advise/cost.cpp): exact softmax (M = 0; causal: the pairs the mask keeps) or "
      "feature attention at M features");
  m.def("_publish_output", &publish_output, py::arg("tmp"), py::arg("path"), py::arg("replace"),
        "Moves the finished tmp onto path, atomically; without replace it refuses a path that appeared meanwhile");
  m.def(
      "_write_report_file",
      [](const std::string& path, const std::string& report, const std::string& prov) {
        const nlohmann::json r = nlohmann::json::parse(report), p = nlohmann::json::parse(prov);
        H5Writer h5(path, true);
        write_provenance(h5, p, r.contains("summary") ? Output::AdviseHeads : Output::Advise);
        h5.group("/advise");
        h5.write_text("/advise/report.json", r.dump(2),
                      {"the whole report as JSON (kestrel.advise's dict)", "none (JSON text)"});
        h5.commit();
      },
      py::arg("path"), py::arg("report"), py::arg("provenance"),
      "Writes path (replacing it: a temporary file of the caller's) with the provenance and schema as root attributes "
      "and the report as /advise/report.json, by the command line's own writers");
}

}  // namespace

py::object kestrel::python::study_default(const std::string& name) { return default_of(study_options(), name); }
py::object kestrel::python::advise_default(const std::string& name) { return default_of(advise_options(), name); }

void kestrel::python::bind_study(py::module_& m) {
  bind_study_tables(m);
  bind_output_files(m);
  m.def(
      "variance_study",
      [](const py::kwargs& kw) {
        const VarianceStudyOptions o = variance_options(
            values_from_kwargs(kw, study_options(), "variance_study", lists_of(StudyCommand::Variance)));
        warn_layout(o);
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
       options_doc(study_infos(StudyCommand::Variance)))
          .c_str());
  m.def("sweep", &sweep_py, py::arg("out"),
        ("`kestrel sweep --out OUT` as a function, with its options as keywords (lists for sigma, dim, points, "
         "features): writes OUT (resumable, extendable by grid values) and returns the `results` entries of "
         "`kestrel sweep --json`. progress=True prints `grid point i/N ... ETA` on sys.stderr; force=True (as --force) "
         "replaces an existing OUT and discards the finished points of a sweep with other options. A shard (shard=, "
         "or a Slurm array task) writes only OUT.parts/ and returns its own rows; `kestrel sweep merge OUT` writes "
         "OUT. Options:" +
         options_doc(study_infos(StudyCommand::Sweep)) +
         options_doc(describe(sweep_run_options(), std::function<bool(const Option<SweepOptions>&)>())))
            .c_str());
  m.def(
      "advise",
      [](const py::object& Q, const py::object& K, const py::object& V, py::kwargs kw) {
        const bool show = pop_progress(kw), force = pop_flag(kw, "force");
        const std::string path = pop_out(kw);
        const AdviseOptions o = advise_options_from(values_from_kwargs(kw, advise_options(), "advise"));
        if (!path.empty()) check_output(path, force);  // a directory or unwritable path: refused before computing
        if (!o.learned.empty()) return advise_learned(Q, K, V, o, show, kw, path, force);
        if (stacked(Q) || stacked(K) || stacked(V)) return advise_stacked(Q, K, V, o, show, kw, path, force);
        return advise_single(Q, K, V, o, show, kw, path, force);
      },
      py::arg("Q"), py::arg("K"), py::arg("V") = py::none(),
      ("`kestrel advise` as a function: Q (Lq x d), K (Lk x d) and V (Lk x dv, or None) with one token per row; "
       "options as keywords (same names with '_' for '-'). Returns the report of `kestrel advise --json` as a dict: "
       "per estimator and sampler the predicted error quantiles, the M for the target, the features' exponents per "
       "number format and, with validate=R, the measured error; the cost and the recommendation. progress=True "
       "prints the command line's progress lines on sys.stderr. out='R.h5' also writes the HDF5 report that "
       "`kestrel advise --out R.h5` writes (the same writer; it refuses an existing file unless force=True; "
       "kestrel.advice.plot_file('R.h5', 'R.png') draws its plot). Q, K and V as [heads, L, d] or [layers, heads, L, "
       "d] "
       "arrays are advised per head (K and V may have fewer heads, dividing Q's: grouped-query attention): the report "
       "then has every head's rows (with layer, head and kv_head), a summary per estimator and sampler (the M for "
       "every head and for the median head) and each head's own cost and recommendation under heads. With "
       "learned=['hedgehog'], Q, K and V have a sequences axis first ([sequences, L, d] for one head, [sequences, "
       "heads, L, d] or [sequences, layers, heads, L, d]): the random rows are advised on the first sequence and each "
       "learned map is fitted on some sequences and judged on the others (held_out), ranked with them. Options:" +
       options_doc(describe(advise_options(), std::function<bool(const AdviseOption&)>())) + advice_row_doc())
          .c_str());
}
