// CompressionOptions::prepare, the one place a method, its options and its budget are built:
// --prefill-evict block becomes the method's prefill=block (and is what a KV file stores), is
// nothing more for a method that always works block-wise, and is refused naming the methods
// that have it otherwise; an explicit budget the options cannot work with is refused.
#include <gtest/gtest.h>

#include "engine/compression.h"
#include "util/error.h"

namespace kvslim {
namespace {

CompressionOptions options(const std::string& press, const std::string& prefill_evict,
                           std::vector<std::string> press_options = {}) {
  CompressionOptions c;
  c.press = press;
  c.press_options = std::move(press_options);
  c.prefill_evict = parse_prefill_evict(prefill_evict);
  return c;
}

TEST(CompressionOptions, BlockBecomesTheMethodsOption) {
  const PreparedCompression snap = options("snapkv", "block", {"window=4", "prefill=end"}).prepare();
  EXPECT_EQ(snap.options, (std::vector<std::string>{"window=4", "prefill=block"}));
  EXPECT_TRUE(snap.press->evicts_each_prefill_block());
  EXPECT_EQ(snap.spec.name(), "snapkv");
  const PreparedCompression end = options("snapkv", "end", {"window=4"}).prepare();
  EXPECT_EQ(end.options, (std::vector<std::string>{"window=4"}));
  EXPECT_FALSE(end.press->evicts_each_prefill_block());
  // adakv:ARG keeps its argument; its block-wise eviction is its own option too.
  const PreparedCompression ada = options("adakv:tova", "block").prepare();
  EXPECT_EQ(ada.options, (std::vector<std::string>{"prefill=block"}));
  EXPECT_TRUE(ada.press->evicts_each_prefill_block());
}

TEST(CompressionOptions, AMethodThatAlwaysEvictsPerBlockNeedsNothing) {
  const PreparedCompression keydiff = options("keydiff", "block", {"block=16"}).prepare();
  EXPECT_EQ(keydiff.options, (std::vector<std::string>{"block=16"}));
  EXPECT_TRUE(keydiff.press->evicts_each_prefill_block());
}

TEST(CompressionOptions, AMethodWithoutBlockWiseEvictionRefusesIt) {
  for (const char* method : {"full", "random", "lagkv", "laq", "quest", "sparq", "exact_topk", "rocketkv"}) {
    try {
      options(method, "block").prepare();
      ADD_FAILURE() << method << " accepted --prefill-evict block";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--prefill-evict block: method '" + std::string(method) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("keydiff (always)"), std::string::npos) << what;
      EXPECT_NE(what.find("snapkv"), std::string::npos) << what;
    }
  }
}

TEST(CompressionOptions, TheBudgetIsCheckedAndResolvedHere) {
  CompressionOptions c = options("snapkv", "end");
  c.budget = 16;  // below the default window of 32
  EXPECT_THROW(c.prepare(), Error);
  c.budget = 64;
  EXPECT_EQ(c.prepare().budget_for(1000), 64);
  c.budget.reset();
  c.ratio = 0.75;
  EXPECT_EQ(c.prepare().budget_for(1000), 250);
  EXPECT_EQ(c.prepare().budget_for(1), 1);
  c.ratio.reset();
  EXPECT_EQ(c.prepare().budget_for(1000), kNoBudget);
}

// A method with an `adapter` option (lookaheadkv) takes the command's default adapter when its
// options name none; an explicit one wins; other methods never get it; without one, the refusal
// names where the command looked.
TEST(CompressionOptions, AnAdapterOptionTakesTheDefaultAdapter) {
  CompressionOptions c = options("lookaheadkv", "end");
  c.default_adapter = c.adapter_sought = "/models/m.lookahead.gguf";
  EXPECT_FALSE(c.lacks_adapter());
  EXPECT_EQ(c.effective_options(), (std::vector<std::string>{"adapter=/models/m.lookahead.gguf"}));
  c.press_options = {"kernel=5", "adapter=/elsewhere/a.gguf"};
  EXPECT_EQ(c.effective_options(), (std::vector<std::string>{"kernel=5", "adapter=/elsewhere/a.gguf"}));
  CompressionOptions snap = options("snapkv", "end", {"window=4"});
  snap.default_adapter = "/models/m.lookahead.gguf";
  EXPECT_FALSE(snap.lacks_adapter());
  EXPECT_EQ(snap.effective_options(), (std::vector<std::string>{"window=4"}));

  CompressionOptions none = options("lookaheadkv", "block");
  none.adapter_sought = "/models/m.lookahead.gguf";
  EXPECT_TRUE(none.lacks_adapter());
  try {
    none.effective_options();
    ADD_FAILURE() << "no adapter accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/models/m.lookahead.gguf does not exist"), std::string::npos) << e.what();
  }
  none.adapter_sought.clear();  // a command that looks nowhere
  EXPECT_THROW(none.effective_options(), Error);
}

// The words of --prefill-evict and of the server's slot keys: parsed and spelled in one place.
TEST(CompressionOptions, PrefillEvictWordsRoundTripAndOthersAreRefusedByName) {
  EXPECT_EQ(parse_prefill_evict("end"), PrefillEvict::End);
  EXPECT_EQ(parse_prefill_evict("block"), PrefillEvict::Block);
  EXPECT_EQ(to_string(PrefillEvict::End), "end");
  EXPECT_EQ(to_string(PrefillEvict::Block), "block");
  for (const char* bad : {"", "Block", "blocks", "sometimes"}) {
    try {
      parse_prefill_evict(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("--prefill-evict must be end or block (got '{}')", bad));
    }
  }
  EXPECT_EQ(CompressionOptions{}.prefill_evict, PrefillEvict::End);  // the papers' setting by default
}

}  // namespace
}  // namespace kvslim
