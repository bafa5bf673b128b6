// Python front-end of the option tables (see bind_options.hpp).
#include "bind_options.hpp"

#include <pybind11/stl.h>

namespace kestrel::python {

std::string scalar_text(const py::handle& v, const std::string& name, OptionKind kind, const std::string& where,
                        bool integer_text) {
  const char* want = kind == OptionKind::Integer ? "an integer"
                     : kind == OptionKind::Real  ? "a number"
                     : kind == OptionKind::Flag  ? "True or False"
                                                 : "a string";
  const std::string got = py::repr(v).cast<std::string>();
  if (py::isinstance<py::bool_>(v)) {
    require(kind == OptionKind::Flag, "{}: expected {}, got {}", where, want, got);
    return v.cast<bool>() ? "true" : "false";
  }
  if (py::isinstance<py::str>(v)) {
    require(kind == OptionKind::Text, "{}: expected {}, got the string {}", where, want, got);
    return v.cast<std::string>();
  }
  if (py::hasattr(v, "__index__") && kind != OptionKind::Flag) {  // int, numpy integers
    if (name == "kernel") return "scaled:" + py::str(v.attr("__index__")()).cast<std::string>();
    require(kind != OptionKind::Text || integer_text, "{}: expected {}, got {}", where, want, got);
    return py::str(v.attr("__index__")()).cast<std::string>();
  }
  if (py::hasattr(v, "__float__") && kind != OptionKind::Flag) {  // float, numpy floats
    const std::string r = py::repr(py::float_(py::reinterpret_borrow<py::object>(v))).cast<std::string>();
    if (name == "kernel") return "scaled:" + r;
    require(kind == OptionKind::Real, "{}: expected {}, got {}", where, want, got);
    return r;
  }
  throw InvalidArgument(fmt::format("{}: expected {}, got {}", where, want, got));
}

std::string value_text(const py::handle& value, const std::string& name, OptionKind kind, bool takes_list,
                       const std::string& where, const char* function, bool integer_text) {
  const bool sequence =
      py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value) ||
      (py::hasattr(value, "ndim") && py::hasattr(value, "tolist") && py::getattr(value, "ndim").cast<int>() > 0);
  if (!sequence) return scalar_text(value, name, kind, where, integer_text);
  require(takes_list, "{}: takes one value in kestrel.{}(), got a list", where, function);
  const py::object obj = py::reinterpret_borrow<py::object>(value);
  const py::list items =
      py::hasattr(obj, "tolist") && !py::isinstance<py::list>(obj) ? py::list(obj.attr("tolist")()) : py::list(obj);
  require(!items.empty(), "{}: the list is empty", where);
  std::string text;
  for (const auto& item : items) {
    const std::string s = scalar_text(item, name, kind, where, integer_text);
    require(s.find(',') == std::string::npos, "{}: list items must not contain ',', got '{}'", where, s);
    text += (text.empty() ? "" : ",") + s;
  }
  return text;
}

std::string call_text(const char* function, const py::kwargs& kw, const std::string& first) {
  std::string s = fmt::format("python: kestrel.{}({}", function, first);
  for (const auto& [k, v] : kw)
    s += fmt::format("{}{}={}", s.back() == '(' ? "" : ", ", k.cast<std::string>(), py::repr(v).cast<std::string>());
  return s + ")";
}

py::list options_list(const std::vector<OptionInfo>& infos) {
  py::list out;
  for (const auto& o : infos) {
    py::dict d;
    d["name"] = o.name;
    d["kind"] = to_string(o.kind);
    d["list"] = o.list;
    d["default"] = o.default_text;
    d["help"] = o.help;
    out.append(d);
  }
  return out;
}

}  // namespace kestrel::python
