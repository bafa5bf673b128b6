// Python front-end of the option tables (frontend/option_table.hpp): keywords are the options' names with '_' for
// '-', their values become the text the command line would carry and go through the table's own parsers; None is
// "not given" (the default). kestrel._options() exposes every table, and python/kestrel/__init__.py generates the
// functions' signatures (inspect.signature, help()) from it.
#pragma once
#include <algorithm>
#include <functional>
#include <string>

#include <pybind11/pybind11.h>

#include "convert.hpp"
#include "core/error.hpp"
#include "frontend/option_table.hpp"

namespace kestrel::python {

namespace py = pybind11;

inline std::string py_name(std::string n) {
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// One Python value as the text the command line would carry.
std::string scalar_text(const py::handle& v, const std::string& name, OptionKind kind, const std::string& where,
                        bool integer_text = false);
// A list (list, tuple, 1-D array) as comma-joined text; `takes_list` false refuses it.
std::string value_text(const py::handle& v, const std::string& name, OptionKind kind, bool takes_list,
                       const std::string& where, const char* function, bool integer_text = false);
// "python: kestrel.f(first, k=v, ...)" for provenance.
std::string call_text(const char* function, const py::kwargs& kw, const std::string& first = "");
// The rows of kestrel._options(): name, kind, list, default (text), help.
py::list options_list(const std::vector<OptionInfo>& infos);

template <typename Options>
GivenValues values_from_kwargs(const py::kwargs& kw, const OptionTable<Options>& table, const char* function,
                               const std::function<bool(const Option<Options>&)>& list = nullptr) {
  GivenValues v;
  std::vector<std::string> names;
  for (const auto& o : table) names.push_back(py_name(o.name));
  for (const auto& [key, value] : kw) {
    const std::string k = key.template cast<std::string>();
    std::string name = k;
    std::replace(name.begin(), name.end(), '_', '-');
    const Option<Options>* opt = find_option(table, name);
    if (!opt || k.find('-') != std::string::npos)
      throw py::type_error(
          fmt::format("{}() got an unexpected keyword argument '{}'{}", function, k, did_you_mean(k, names)));
    if (value.is_none()) continue;  // the default
    v[name] = {value_text(value, opt->name, opt->kind, list ? list(*opt) : opt->list, k, function, opt->integer_text),
               k};
  }
  return v;
}

// The default of a table's option as a Python value, for a keyword of a function that is not generated from a table
// but means the same thing (kernel="softmax" of kestrel.log_kernel is the study table's --kernel default): declared
// once, in the options struct.
template <typename Options>
py::object default_of(const OptionTable<Options>& t, const std::string& name) {
  const Option<Options>* o = find_option(t, name);
  if (!o) throw std::logic_error("no option '" + name + "' in the table");
  return from_json(recorded_value(o->integer_text ? OptionKind::Text : o->kind, o->show(Options{})));
}

// default_of the study options (frontend/study_options.hpp), for the low-level functions' kernel, features, sampler and
// seed keywords (bind_study.cpp).
py::object study_default(const std::string& name);
// default_of advise's options (frontend/advise_options.hpp): the chunk of kestrel.rounded_sums is advise's --chunk.
py::object advise_default(const std::string& name);

// "\n  name (default D): help" for each option, for the docstrings.
inline std::string options_doc(const std::vector<OptionInfo>& infos) {
  std::string s;
  for (const auto& o : infos)
    s += fmt::format("\n  {}: {}{}{}", py_name(o.name), o.help, o.list ? " (a list)" : "",
                     o.default_text.empty() ? "" : fmt::format(" [default {}]", o.default_text));
  return s;
}

}  // namespace kestrel::python
