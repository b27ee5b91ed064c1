// The sweep's view of task.h, in its own file so that only what runs the generated tasks (the
// CLI) links the generators; tests link their own fake catalog.
#include "eval/sample_source.h"

namespace kvslim::eval {

TaskCatalog generated_tasks() { return {find_task, make_sample, score_output, partial_score}; }

}  // namespace kvslim::eval
