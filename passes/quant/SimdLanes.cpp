// CPU feature check for SimdLanes.h.
#include "SimdLanes.h"

#include <string>

namespace ninfer {
namespace quant {

namespace {
#if defined(__GNUC__) && defined(__x86_64__)
// Runs before main: the CPU model must be read first (GCC's rule for constructors).
const int kWidestLanes = [] {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return 16;
  return __builtin_cpu_supports("avx2") ? 8 : 4;
}();
#else
const int kWidestLanes = 4;
#endif
} // namespace

int widestLanes() { return kWidestLanes; }

Result<int> resolveLanes(int lanes) {
  if (lanes == 0)
    return kWidestLanes;
  if ((lanes == 4 || lanes == 8 || lanes == 16) && lanes <= kWidestLanes)
    return lanes;
  return Status::error("quant: cannot run " + std::to_string(lanes) +
                       "-lane vectors on this CPU (widest: " + std::to_string(kWidestLanes) + ")");
}

} // namespace quant
} // namespace ninfer
