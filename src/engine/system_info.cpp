#include "engine/system_info.h"

#include "kv/attention.h"
#include "tensor/isa.h"
#include "tensor/ops.h"

namespace kvslim {

nlohmann::json system_info(int head_dim) {
  nlohmann::json compiled = nlohmann::json::array(), supported = nlohmann::json::array();
  for (Isa isa : compiled_isas()) compiled.push_back(isa_name(isa));
  for (Isa isa : supported_isas()) supported.push_back(isa_name(isa));
  nlohmann::json weights = nlohmann::json::object();
  for (DType type : kAllDTypes)
    weights[dtype_name(type)] = {{"decode", matvec_kernel(type)}, {"prefill", matmul_kernel(type)}};
  nlohmann::json out = {{"cpu", cpu_description()},
                        {"isa", isa_name(active_isa())},
                        {"isa_best", isa_name(best_isa())},
                        {"isa_supported", supported},
                        {"isa_compiled", compiled},
                        {"weight_kernels", weights},
                        {"attention_prefill_kernel", attention_gemm_kernel()}};
  if (head_dim > 0) {
    nlohmann::json kv = nlohmann::json::object();
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
      kv[dtype_name(type)] = attention_kernel(type, head_dim);
    out["kv_kernels"] = kv;
  }
  return out;
}

}  // namespace kvslim
