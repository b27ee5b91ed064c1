// Instruction-set levels: the choice of the active level (KVSLIM_ISA), its refusals, and that the
// portable binary runs at every level this CPU has with the same greedy tokens and kept sets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "cli_helpers.h"
#include "tensor/isa.h"
#include "util/error.h"

namespace kvslim {
namespace {

using testing::expect_clean_error;
using testing::run;
using testing::temp_path;

TEST(Isa, NamesRoundTripAndUnknownNamesListTheChoices) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512F, Isa::Avx512, Isa::Avx512Bf16, Isa::Neon,
                  Isa::NeonDot, Isa::NeonI8mm}) {
    EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  }
  try {
    isa_from_name("sse9");
    FAIL() << "an unknown level was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'sse9'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("avx2"), std::string::npos) << e.what();
  }
}

TEST(Isa, SupportedLevelsAreCompiledAscendingAndStartWithScalar) {
  const auto supported = supported_isas();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), Isa::Scalar);
  EXPECT_EQ(supported.back(), best_isa());
  const auto compiled = compiled_isas();
  size_t at = 0;  // supported is a subsequence of compiled
  for (Isa isa : supported) {
    while (at < compiled.size() && compiled[at] != isa) ++at;
    ASSERT_LT(at, compiled.size()) << isa_name(isa) << " is supported but not compiled, or out of order";
    EXPECT_TRUE(cpu_supports(isa));
  }
#if defined(__x86_64__)
  EXPECT_EQ(compiled.size(), 6u);
#elif defined(__aarch64__)
  EXPECT_EQ(compiled.size(), 4u);
#endif
}

TEST(Isa, ALevelTheCpuLacksIsRefusedAndTheActiveLevelIsKept) {
  const Isa before = active_isa();
  for (Isa isa : compiled_isas()) {
    if (cpu_supports(isa)) continue;
    EXPECT_THROW(set_active_isa(isa), Error) << isa_name(isa);
    EXPECT_EQ(active_isa(), before);
  }
  {
    ScopedIsa scalar(Isa::Scalar);
    EXPECT_EQ(active_isa(), Isa::Scalar);
  }
  EXPECT_EQ(active_isa(), before);
}

// The binary's choice: the best level by default, KVSLIM_ISA to force one, a clear error line for a
// bad name or a level the CPU lacks.
nlohmann::json system_at(const std::string& env) {
  const auto r = run("info --system --json", env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["system"];
}

TEST(IsaCli, InfoSystemNamesTheLevelAndAKernelForEveryType) {
  const auto sys = system_at("");
  // The command inherits this process's environment: the best level, or the one a KVSLIM_ISA
  // of the whole test run forces (as active_isa() reads it).
  EXPECT_EQ(sys["isa"], isa_name(active_isa()));
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}) {
    ASSERT_TRUE(sys["weight_kernels"].contains(type)) << type;
    EXPECT_FALSE(sys["weight_kernels"][type]["decode"].get<std::string>().empty());
    EXPECT_FALSE(sys["weight_kernels"][type]["prefill"].get<std::string>().empty());
  }
  EXPECT_EQ(system_at("KVSLIM_ISA=scalar")["isa"], "scalar");
  EXPECT_EQ(system_at("KVSLIM_ISA=scalar")["weight_kernels"]["q8_0"]["decode"], "scalar int8 dot");
}

TEST(IsaCli, AnUnknownOrUnsupportedLevelIsOneErrorLine) {
  expect_clean_error(run("info --system", "KVSLIM_ISA=sse9"), "unknown instruction-set level 'sse9'");
  for (Isa isa : compiled_isas()) {
    if (cpu_supports(isa)) continue;
    expect_clean_error(run("info --system", std::string("KVSLIM_ISA=") + isa_name(isa)), "this CPU cannot run");
  }
}

// The default (portable) build at every level this CPU runs: greedy tokens and the kept sets of a
// method agree with the scalar level's on the default model and the README's example.
struct LevelRun {
  std::string tokens;
  nlohmann::json kept;
};

LevelRun run_at(Isa isa) {
  const std::string src = KVSLIM_SOURCE_DIR;
  const std::string env = std::string("KVSLIM_ISA=") + isa_name(isa);
  const std::string model = " -m " + src + "/models/kvslim-4k.gguf -f " + src + "/docs/examples/passkey.txt";
  const auto g = run("generate" + model + " -n 8 --temp 0 --press snapkv --budget 64 --json --threads 2", env);
  EXPECT_EQ(g.exit_code, 0) << isa_name(isa) << ": " << g.err;
  const std::string out = temp_path(std::string("kept-") + isa_name(isa) + ".json");
  const auto i = run("inspect" + model + " --press snapkv --budget 64 --threads 2 -o " + out, env);
  EXPECT_EQ(i.exit_code, 0) << isa_name(isa) << ": " << i.err;
  std::ifstream in(out);
  LevelRun r;
  r.tokens = nlohmann::json::parse(g.out)["token_ids"].dump();
  r.kept = nlohmann::json::parse(in);
  return r;
}

TEST(IsaCli, EveryLevelGivesTheScalarLevelsTokensAndKeptSets) {
  const LevelRun scalar = run_at(Isa::Scalar);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    const LevelRun r = run_at(isa);
    EXPECT_EQ(r.tokens, scalar.tokens) << isa_name(isa);
    EXPECT_EQ(r.kept, scalar.kept) << isa_name(isa);
  }
}

}  // namespace
}  // namespace kvslim
