// The module-level functions: the method registry and this process's CPU level (as the JSON
// `kvslim presses --json` and `kvslim info --system` print), and eval (the sweep `kvslim eval`
// runs, through the same request type).
#include <pybind11/stl.h>

#include "bindings.h"
#include "engine/press_catalogue.h"
#include "engine/system_info.h"
#include "eval/eval_request.h"
#include "kv/kv_shape.h"
#include "model_state.h"

namespace kvslim::python {

namespace {

// Runs the sweep into `out` (records appended to out/samples.jsonl, resumable as the CLI's).
int64_t eval(ModelState& m, const std::string& methods, const std::vector<int64_t>& budgets,
             const std::vector<std::string>& tasks, const std::vector<int64_t>& lengths, int samples, uint64_t seed,
             const std::vector<double>& depths, const std::string& data, const std::string& protocol,
             const std::vector<std::string>& metrics, const std::string& out, const std::string& shard,
             int response_tokens, const std::string& continuation, int batch, int kv_page,
             const std::string& cache_type_k, const std::string& cache_type_v) {
  eval::EvalRequest r;
  r.methods = methods;
  r.budgets = budgets;
  r.grid = {.tasks = tasks, .lengths = lengths, .depths = depths, .samples = samples, .seed = seed};
  r.data = data;
  r.protocol = protocol;
  r.metrics = metrics;
  r.out = out;
  r.shard = shard;
  r.response_tokens = response_tokens;
  r.continuation = continuation;
  r.batch = batch;
  r.kv_page = kv_page;
  r.cache_type_k = kv_type_from_name(cache_type_k, "cache_type_k");
  r.cache_type_v = kv_type_from_name(cache_type_v, "cache_type_v");
  std::vector<std::string> warnings;
  const eval::PreparedEval prepared = eval::prepare_eval(r, [&](const std::string& w) { warnings.push_back(w); });
  for (const std::string& w : warnings) PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1);
  return run_engine(m, [&] { return eval::run_eval(*m.model, m.pool, prepared).ran; });
}

}  // namespace

void bind_catalogue(py::module_& m) {
  m.def("_presses_json", [] { return press_catalogue().dump(); });
  m.def("_system_json", [] { return system_info().dump(); });
  m.def("_eval", &eval, py::arg("model"), py::arg("methods"), py::arg("budgets"), py::arg("tasks"), py::arg("lengths"),
        py::arg("samples"), py::arg("seed"), py::arg("depths"), py::arg("data"), py::arg("protocol"),
        py::arg("metrics"), py::arg("out"), py::arg("shard"), py::arg("response_tokens"), py::arg("continuation"),
        py::arg("batch"), py::arg("kv_page"), py::arg("cache_type_k"), py::arg("cache_type_v"));
}

}  // namespace kvslim::python
