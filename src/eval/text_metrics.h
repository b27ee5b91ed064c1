// LongBench's answer metrics (THUDM/LongBench, LongBench/metrics.py), the English ones, with the
// same normalisation and the same quirks, so scores compare with published LongBench numbers.
// Text is UTF-8; characters are Unicode code points, as in Python.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvslim::eval {

// normalize_answer: lower case, ASCII punctuation removed, the words "a", "an" and "the"
// removed, whitespace runs collapsed to one space, no space at either end.
std::string normalize_answer(std::string_view text);

// qa_f1_score: F1 of the bag of words of the normalised prediction against the normalised
// ground truth (0 when they share no word).
double qa_f1_score(std::string_view prediction, std::string_view ground_truth);

// rouge_score: the F of ROUGE-L as the `rouge` package LongBench calls computes it (summary
// level): both texts are split into sentences at '.', sentences into words at spaces; the
// overlap is the number of distinct words in the union of the LCS of every (reference sentence,
// prediction sentence) pair, and P and R divide it by the number of distinct words of the
// prediction and of the reference; F = 2PR / (P + R + 1e-8). 0 when either text has no sentence.
double rouge_l_score(std::string_view prediction, std::string_view ground_truth);

// classification_score: the classes (of all_classes) that occur in the prediction, dropping
// those that are a part of the ground truth but not equal to it (with LongBench's loop, which
// skips the class after each one it drops); 1 / matches when the ground truth is among them.
double classification_score(std::string_view prediction, std::string_view ground_truth,
                            const std::vector<std::string>& all_classes);

// retrieval_score: the fraction of the numbers in the prediction that equal N of the ground
// truth's "Paragraph N" (0 when the prediction has no number). Throws kvslim::Error when the
// ground truth names no paragraph.
double retrieval_score(std::string_view prediction, std::string_view ground_truth);

// count_score: the fraction of the numbers in the prediction that equal the ground truth.
double count_score(std::string_view prediction, std::string_view ground_truth);

// code_sim_score: the first line of the prediction (leading newlines dropped) without '`', '#'
// or "//" ("" when there is none), compared with the ground truth by fuzzywuzzy's ratio (with
// python-Levenshtein): levenshtein_ratio rounded to a whole percent (half to even, as Python's
// round), over 100.
double code_sim_score(std::string_view prediction, std::string_view ground_truth);

// python-Levenshtein's ratio: (|a| + |b| - d) / (|a| + |b|), where d is the edit distance with
// insertions and deletions costing 1 and substitutions 2, over code points; 1 for two empty
// strings. With those costs d = |a| + |b| - 2 LCS(a, b), so the ratio is 2 LCS / (|a| + |b|).
double levenshtein_ratio(std::string_view a, std::string_view b);

}  // namespace kvslim::eval
