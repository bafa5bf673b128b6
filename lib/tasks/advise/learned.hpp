// advise's learned candidates (issue 65 items 1-3): a Hedgehog map fitted per M to one head's attention on some of its
// sequences and judged on the others (tasks/learned_attention.hpp), as an advice row decided by the rules of the random
// rows (advise_steps::decide_on_curve): its curve is the held-out 95th-percentile row error against M (mean over the
// fit seeds, each with its own split and start) with the SE over the seeds, from the grid's smallest M to its largest
// (the learned rows' budget), read on the grid: the row names a fitted M where the curve -+ 2 SE cross the target
// before the same fitted M (else "not settled"; "out of reach" where the curve - 2 SE is above it at the grid's largest
// M). The map is deterministic at inference: no draws, its error a bias judged on held-out tokens only.
#pragma once
#include <vector>

#include "tasks/advise/advise.hpp"
#include "tasks/learned_attention.hpp"

namespace kestrel {

// The row of a learned curve (estimator "hedgehog", sampler "learned"): decision, M and interval, the held-out curve,
// the training curve's gap, fit times, and the parameters of fit seed 0 at the named M (at the grid's largest M where
// none is named). opt: target and metric as for the random rows; its budget is not used (the grid's largest M is).
AdviceRow learned_row(const std::vector<LearnedCurvePoint>& curve, const AdviseOptions& opt);

}  // namespace kestrel
