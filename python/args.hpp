// Scalar arguments of the Python functions, checked at the door: Int<"features", 1>, Real<"sigma">, Str<"sampler">
// and Bool<"quick"> take any Python object and turn a wrong one (features=-1, features=1.5, seed=-1, sampler=3,
// quick="yes") into a ValueError naming the argument and the value ("features must be an integer >= 1, got -1"),
// where pybind11's built-in casters would raise a TypeError listing every overload's signature (issue 37 item 8).
// Integers are Python or NumPy integers, never bool or float (2.0 is refused rather than rounded, as the command
// line refuses --features 2.0); numbers are ints or floats, never bool, str or complex.
#pragma once
#include <cstdint>
#include <string>

#include <pybind11/pybind11.h>

#include "core/error.hpp"

namespace kestrel::python {

namespace py = pybind11;

// A string literal as a template argument: the argument's name in messages.
template <std::size_t N>
struct ArgName {
  char text[N]{};
  constexpr ArgName(const char (&s)[N]) {  // NOLINT(google-explicit-constructor): used as Int<"seed">
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
};

template <ArgName Name, std::uint64_t Lo = 0, std::uint64_t Hi = UINT64_MAX>
struct Int {
  std::uint64_t value = 0;
  operator std::uint64_t() const { return value; }  // NOLINT(google-explicit-constructor)
};
template <ArgName Name>
struct Real {
  double value = 0;
  operator double() const { return value; }  // NOLINT(google-explicit-constructor)
};
template <ArgName Name>
struct Str {
  std::string value;
  operator const std::string&() const { return value; }  // NOLINT(google-explicit-constructor)
};
template <ArgName Name>
struct Bool {
  bool value = false;
  operator bool() const { return value; }  // NOLINT(google-explicit-constructor)
};

// A bound object of class T (Estimator, Draw) given as the argument `name`, or InvalidArgument "draw must be a
// kestrel.Draw, got 'abc'" (not pybind's TypeError listing the signatures). The object must outlive the reference.
template <typename T>
const T& object_arg(py::handle v, const char* name, const char* what) {
  if (!py::isinstance<T>(v)) {
    std::string r = py::repr(v).cast<std::string>();
    throw InvalidArgument(std::string(name) + " must be " + what + ", got " +
                          (r.size() > 60 ? r.substr(0, 57) + "..." : r));
  }
  return v.cast<const T&>();
}

// The checks behind the casters: InvalidArgument (a ValueError in Python) naming `name` and repr(value).
std::uint64_t int_arg(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi);
double real_arg(py::handle v, const char* name);
std::string str_arg(py::handle v, const char* name);
bool bool_arg(py::handle v, const char* name);

}  // namespace kestrel::python

namespace pybind11::detail {

template <kestrel::python::ArgName N, std::uint64_t Lo, std::uint64_t Hi>
struct type_caster<kestrel::python::Int<N, Lo, Hi>> {
  using Arg = kestrel::python::Int<N, Lo, Hi>;
  PYBIND11_TYPE_CASTER(Arg, const_name("int"));
  bool load(handle src, bool) {
    value.value = kestrel::python::int_arg(src, N.text, Lo, Hi);
    return true;
  }
  static handle cast(const kestrel::python::Int<N, Lo, Hi>& v, return_value_policy, handle) {
    return PyLong_FromUnsignedLongLong(v.value);
  }
};

template <kestrel::python::ArgName N>
struct type_caster<kestrel::python::Real<N>> {
  PYBIND11_TYPE_CASTER(kestrel::python::Real<N>, const_name("float"));
  bool load(handle src, bool) {
    value.value = kestrel::python::real_arg(src, N.text);
    return true;
  }
  static handle cast(const kestrel::python::Real<N>& v, return_value_policy, handle) {
    return PyFloat_FromDouble(v.value);
  }
};

template <kestrel::python::ArgName N>
struct type_caster<kestrel::python::Str<N>> {
  PYBIND11_TYPE_CASTER(kestrel::python::Str<N>, const_name("str"));
  bool load(handle src, bool) {
    value.value = kestrel::python::str_arg(src, N.text);
    return true;
  }
  static handle cast(const kestrel::python::Str<N>& v, return_value_policy, handle) {
    return PyUnicode_FromStringAndSize(v.value.data(), static_cast<Py_ssize_t>(v.value.size()));
  }
};

template <kestrel::python::ArgName N>
struct type_caster<kestrel::python::Bool<N>> {
  PYBIND11_TYPE_CASTER(kestrel::python::Bool<N>, const_name("bool"));
  bool load(handle src, bool) {
    value.value = kestrel::python::bool_arg(src, N.text);
    return true;
  }
  static handle cast(const kestrel::python::Bool<N>& v, return_value_policy, handle) {
    return handle(v.value ? Py_True : Py_False).inc_ref();
  }
};

}  // namespace pybind11::detail
