// Fusions on the lowered plan, where buffer offsets are known so that an
// aliasing hazard can be ruled out exactly.
#pragma once

#include "plan_generated.h"

namespace ninfer {

// Folds each residual add into the linear right before it:
//   linear(x) -> b; add(r, b) -> c   becomes   linear(x, residual r) -> c
// when b is read by that add only and c does not overlap x (c may be r itself:
// the kernels read residual element i before writing output element i).
// Removes one kernel launch and one activation round trip per fused add.
// Returns the number of adds fused.
int fuseResidualAdds(plan::PlanT &plan);

} // namespace ninfer
