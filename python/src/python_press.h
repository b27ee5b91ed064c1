// A compression method written in Python (kvslim.ScorerPress or kvslim.Press subclasses) run by
// the engine like a built-in one: the prompt's window queries and their attention rows are
// collected while prefill runs, then at the end of prefill each layer's keys, values, queries
// and attention are handed to the Python object once; its scores (ScorerPress) or kept indices
// (Press) decide, per KV head, what the engine keeps, and the engine evicts and frees the rest
// exactly as for a built-in method (ScorerPress::compress, top-budget selection).
#pragma once

#include <memory>

#include "engine/compression.h"
#include "py_handle.h"

namespace kvslim::python {

// The method as CompressionOptions::custom: its name is "python:" + the class name; it has no
// --press-opt options (a Python press's settings are its attributes), no block-wise eviction,
// a per-head budget and the select-again multi-turn rule. Throws pybind11::type_error for an
// object that is not a kvslim.Press.
std::shared_ptr<const PressInfo> python_press_info(const py::object& press);

}  // namespace kvslim::python
