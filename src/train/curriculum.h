// The short-to-long length curriculum: stages of a maximum prompt length and a number of
// steps, written "256:300,512:600,1024:600,2048" (the last stage's step count may be left out:
// it then runs to the end of training). A group of stages repeats with "(LEN:STEPS,...)xN", so
// "(1536:20,4096:20)x3,4096" alternates short and long prompts three times, then stays long.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvslim::train {

class Curriculum {
 public:
  struct Stage {
    int64_t length = 0;
    int64_t steps = 0;  // 0 on the last stage: until the end
  };

  // Throws naming the bad stage: lengths must be positive and steps positive (except the last);
  // a repeated group must be closed, not nested, and repeat a positive number of times.
  static Curriculum parse(const std::string& spec);

  int64_t length_at(int64_t step) const;  // the stage length of update `step` (0-based)
  int64_t max_length() const;
  const std::vector<Stage>& stages() const { return stages_; }
  std::string to_string() const;  // parse(to_string()) == *this

 private:
  std::vector<Stage> stages_;
};

}  // namespace kvslim::train
