// LongBench's metrics against values computed by hand from metrics.py's definitions.
#include <gtest/gtest.h>

#include "eval/text_metrics.h"
#include "util/error.h"

namespace kvslim::eval {
namespace {

TEST(TextMetrics, NormalizeAnswerAsLongBench) {
  EXPECT_EQ(normalize_answer("  An apple a day, THE end.  "), "apple day end");
  EXPECT_EQ(normalize_answer("The theater's anthem"), "theaters anthem");  // only whole words are articles
  EXPECT_EQ(normalize_answer("well-known\tfact\n"), "wellknown fact");     // punctuation goes without a space
  EXPECT_EQ(normalize_answer("Émile ZOLA"), "émile zola");                 // Unicode lower case, as str.lower
  EXPECT_EQ(normalize_answer("a the an"), "");
}

TEST(TextMetrics, QaF1IsTheF1OfNormalisedWordBags) {
  // [eiffel tower in paris] vs [eiffel tower]: 2 shared; P = 2/4, R = 2/2, F1 = 2PR/(P+R) = 2/3.
  EXPECT_DOUBLE_EQ(qa_f1_score("The Eiffel Tower, in Paris!", "Eiffel tower"), 2.0 / 3.0);
  // [x y y z] vs [y y y]: min(2, 3) = 2 shared; P = 1/2, R = 2/3, F1 = (2/3) / (7/6) = 4/7.
  EXPECT_DOUBLE_EQ(qa_f1_score("x y y z", "y y y"), 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(qa_f1_score("Paris", "the paris."), 1.0);
  EXPECT_DOUBLE_EQ(qa_f1_score("London", "Paris"), 0.0);
  EXPECT_DOUBLE_EQ(qa_f1_score("", "Paris"), 0.0);
}

TEST(TextMetrics, RougeLCountsDistinctWordsOfTheUnionOfSentenceLcs) {
  // One sentence each. LCS = "the cat on the mat", whose distinct words {the, cat, on, mat} = 4;
  // distinct words: prediction 5, reference 5; P = R = 4/5, F = 0.8 (less the 1e-8 guard).
  EXPECT_NEAR(rouge_l_score("the cat sat on the mat", "the cat lay on the mat"), 0.8, 1e-7);
  // Lin's union-LCS example: r = w1 w2 w3 w4 w5, c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5.
  // LCS(r, c1) = w1 w2, LCS(r, c2) = w1 w3 w5, union {w1, w2, w3, w5} = 4; R = 4/5, P = 4/8,
  // F = 2 * 0.4 / 1.3 = 8/13.
  EXPECT_NEAR(rouge_l_score("w1 w2 w6 w7 w8. w1 w3 w8 w9 w5", "w1 w2 w3 w4 w5"), 8.0 / 13.0, 1e-7);
  EXPECT_NEAR(rouge_l_score("same words here", "same   words\nhere"), 1.0, 1e-7);  // whitespace collapsed
  EXPECT_EQ(rouge_l_score("", "a reference"), 0.0);
  EXPECT_EQ(rouge_l_score("...", "a reference"), 0.0);  // no sentence at all
  EXPECT_EQ(rouge_l_score("unrelated", "a reference"), 0.0);
}

TEST(TextMetrics, ClassificationSharesCreditAmongMatchedClasses) {
  const std::vector<std::string> classes = {"Location", "Number", "Description", "Entity"};
  EXPECT_EQ(classification_score("Location", "Location", classes), 1.0);
  EXPECT_EQ(classification_score("Location or Number", "Number", classes), 0.5);
  EXPECT_EQ(classification_score("Entity", "Location", classes), 0.0);
  EXPECT_EQ(classification_score("location", "Location", classes), 0.0);  // case matters
  // "city" is part of the truth "capital city" but not it: dropped, so the score is 1/1.
  EXPECT_EQ(classification_score("capital city", "capital city", {"city", "capital city", "country"}), 1.0);
  // LongBench's loop removes "a1" and then skips "a12", which stays: [a12, a123], score 1/2.
  EXPECT_EQ(classification_score("a123", "a123", {"a1", "a12", "a123"}), 0.5);
}

TEST(TextMetrics, RetrievalAndCountScoreTheShareOfRightNumbers) {
  EXPECT_EQ(retrieval_score("Paragraph 12", "Paragraph 12"), 1.0);
  EXPECT_EQ(retrieval_score("Paragraph 3, or maybe Paragraph 12", "Paragraph 12"), 0.5);
  EXPECT_EQ(retrieval_score("Paragraph 012", "Paragraph 12"), 0.0);  // numbers compare as text
  EXPECT_EQ(retrieval_score("I do not know", "Paragraph 12"), 0.0);
  EXPECT_THROW(retrieval_score("12", "the twelfth"), Error);
  EXPECT_EQ(count_score("There are 7 unique paragraphs out of 10", "7"), 0.5);
  EXPECT_EQ(count_score("7", "7"), 1.0);
  EXPECT_EQ(count_score("seven", "7"), 0.0);
}

TEST(TextMetrics, LevenshteinRatioIsTwoLcsOverTotalLength) {
  // kitten/sitting: LCS "ittn" = 4, so d = 6 + 7 - 8 = 5 and the ratio is (13 - 5) / 13.
  EXPECT_DOUBLE_EQ(levenshtein_ratio("kitten", "sitting"), 8.0 / 13.0);
  EXPECT_DOUBLE_EQ(levenshtein_ratio("abc", "abc"), 1.0);
  EXPECT_DOUBLE_EQ(levenshtein_ratio("abc", "xyz"), 0.0);
  EXPECT_DOUBLE_EQ(levenshtein_ratio("", ""), 1.0);
  EXPECT_DOUBLE_EQ(levenshtein_ratio("é", "e"), 0.0);  // code points, not bytes
}

TEST(TextMetrics, CodeSimComparesTheFirstCodeLineInWholePercent) {
  // "x = foo(1)" vs "x = foo(2)": LCS 9 of 10 + 10, ratio 18/20 = 90%.
  EXPECT_DOUBLE_EQ(code_sim_score("\n\n# comment\n```python\n// note\nx = foo(1)\ny = 2", "x = foo(2)"), 0.9);
  // 2 * 1 / 16 = 12.5% rounds half to even: 12; 2 * 3 / 16 = 37.5% rounds to 38.
  EXPECT_DOUBLE_EQ(code_sim_score("abcdefgh", "aijklmno"), 0.12);
  EXPECT_DOUBLE_EQ(code_sim_score("abcdefgh", "abcijklm"), 0.38);
  EXPECT_DOUBLE_EQ(code_sim_score("", "x = 1"), 0.0);
  EXPECT_DOUBLE_EQ(code_sim_score("# only a comment", "x = 1"), 0.0);
  EXPECT_DOUBLE_EQ(code_sim_score("x = 1\n", "x = 1"), 1.0);
}

}  // namespace
}  // namespace kvslim::eval
