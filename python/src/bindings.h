// The parts of the kvslim._kvslim extension module, each registered by its own file.
#pragma once

#include <pybind11/pybind11.h>

namespace kvslim::python {

namespace py = pybind11;

void bind_model(py::module_& m);      // bind_model.cpp: _Model, GenerateResult, _Sampling, _Compression
void bind_session(py::module_& m);    // bind_session.cpp: _Session
void bind_catalogue(py::module_& m);  // bind_catalogue.cpp: the registry, eval, system info

}  // namespace kvslim::python
