#include "model_state.h"

#include <pybind11/stl.h>

#include "python_press.h"

namespace kvslim::python {

py::str utf8_text(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), py::ssize_t(text.size()), "replace");
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

namespace {

// A keyword argument as --press-opt writes it: booleans as true/false, the rest as str().
std::string option_text(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  return py::str(value);
}

}  // namespace

CompressionOptions compression_from(const py::object& press, std::optional<int64_t> budget, std::optional<double> ratio,
                                    const std::string& prefill_evict, const py::dict& options,
                                    const std::string& model_path) {
  CompressionOptions c;
  if (press.is_none()) {
    c.press = "full";
  } else if (py::isinstance<py::str>(press)) {
    c.press = press.cast<std::string>();
  } else {
    c.custom = python_press_info(press);
    c.press = c.custom->name;
  }
  for (const auto& [key, value] : options)
    c.press_options.push_back(std::string(py::str(key)) + "=" + option_text(value));
  c.budget = budget;
  c.ratio = ratio;
  c.prefill_evict = parse_prefill_evict(prefill_evict);
  c.find_default_adapter(model_path, "");
  c.prepare();  // every check now, before any work
  return c;
}

}  // namespace kvslim::python
