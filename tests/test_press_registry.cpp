// What the registry says a method can do agrees with what the method does: block-wise eviction
// (none / through the option prefill=block / always) against the options it declares and whether
// the press it builds evicts after every block by default; a press spec NAME:ARG is parsed once into the method and its
// argument.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/model.h"
#include "press/registry.h"
#include "test_lookahead_adapter.h"
#include "test_models.h"
#include "util/error.h"

namespace kvslim {
namespace {

std::vector<std::string> required_options(const std::string& method) {
  if (method == "lookaheadkv") return {"adapter=" + testing::random_adapter_path(testing::loaded_tiny_model())};
  return {};
}

bool declares(const PressInfo& info, const std::string& key) {
  return std::any_of(info.options.begin(), info.options.end(), [&](const OptionSpec& o) { return o.key == key; });
}

TEST(PressCapabilities, BlockEvictionIsWhatTheMethodDoes) {
  for (const PressInfo& info : press_registry()) {
    SCOPED_TRACE(info.name);
    const BlockEviction block = info.can.block_eviction;
    EXPECT_EQ(declares(info, "prefill"), block == BlockEviction::Option) << "the option prefill=end|block";
    const auto plain = make_press(info.name, required_options(info.name));
    EXPECT_EQ(plain->evicts_each_prefill_block(), block == BlockEviction::Always) << "by default";
    // What prefill=block does per method (its block rule, the bound budget + block) is checked
    // on real sessions in tests/test_block_prefill.cpp; here, that the option is accepted.
    if (block != BlockEviction::Option) continue;
    std::vector<std::string> options = required_options(info.name);
    options.push_back("prefill=block");
    EXPECT_NO_THROW(make_press(info.name, options));
  }
}

TEST(PressSpec, ParsesTheNameAndItsArgumentOnce) {
  const PressSpec wrapped = PressSpec::parse("adakv:tova");
  EXPECT_EQ(wrapped.name(), "adakv");
  ASSERT_TRUE(wrapped.arg.has_value());
  EXPECT_EQ(*wrapped.arg, "tova");
  EXPECT_EQ(wrapped.can().budget_rule, BudgetRule::PerLayer);
  const PressSpec plain = PressSpec::parse("snapkv");
  EXPECT_EQ(plain.name(), "snapkv");
  EXPECT_FALSE(plain.arg.has_value());
  try {
    PressSpec::parse("nope:x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown method 'nope:x'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("snapkv"), std::string::npos) << e.what();
  }
  // The argument is the option `scorer`: a method without it says so.
  EXPECT_THROW(make_press("snapkv:tova", {}), Error);
}

}  // namespace
}  // namespace kvslim
