// A Python object the engine may hold and drop on any thread: its last reference is released
// with the GIL taken, so an engine object (a press, a compression option) can own one while the
// engine runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace kvslim::python {

namespace py = pybind11;

struct PyHandle {
  explicit PyHandle(py::object o) : object(std::move(o)) {}
  ~PyHandle() {
    py::gil_scoped_acquire gil;
    object = py::object();
  }
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;
  py::object object;
};

}  // namespace kvslim::python
