// kvslim._kvslim: the engine for Python. The public API (kvslim.Model, Session, Press, ...) is
// written in python/kvslim/ over these bindings; docs/python.md is its reference.
#include "bindings.h"
#include "util/error.h"

PYBIND11_MODULE(_kvslim, m) {
  using namespace kvslim::python;
  m.doc() = "kvslim engine bindings (use the kvslim package)";
  // kvslim::Error (a bad file, option or request, named in its message) becomes kvslim.Error.
  py::register_exception<kvslim::Error>(m, "Error", PyExc_RuntimeError);
  bind_model(m);
  bind_session(m);
  bind_catalogue(m);
}
