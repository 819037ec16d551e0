// Validation and the parallel-for shared by the quantizers (see QuantCommon.h).
#include "QuantCommon.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <system_error>
#include <thread>

namespace ninfer {
namespace quant {

Status validateSpec(const QuantSpec& spec, int64_t rows, int64_t cols) {
  if (!isQuantBits(spec.bits))
    return Status::error("quant: unsupported bit width " + std::to_string(spec.bits) +
                         " (supported: 8, 4, 3, 2)");
  if (quantFormatIndex(spec.bits, spec.groupSize) < 0)
    return Status::error("quant: unsupported group size " + std::to_string(spec.groupSize) +
                         " for " + std::to_string(spec.bits) +
                         " bits (supported: 32, 64, 128; 16 (K16) with 2 to 4 bits)");
  if (rows <= 0)
    return Status::error("quant: tensor has " + std::to_string(rows) + " rows");
  if (!isQuantizableCols(cols))
    return Status::error("quant: " + std::to_string(cols) +
                         " input columns is not a positive "
                         "multiple of " +
                         std::to_string(kQuantUnitValues));
  return Status::ok();
}

template <typename T>
static Status checkFiniteImpl(const T* values, int64_t count, const char* what) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      return Status::error(std::string("quant: ") + what + " has a non-finite value at index " +
                           std::to_string(i));
  return Status::ok();
}

Status checkFinite(const float* values, int64_t count, const char* what) {
  return checkFiniteImpl(values, count, what);
}
Status checkFinite(const double* values, int64_t count, const char* what) {
  return checkFiniteImpl(values, count, what);
}

int resolveThreads(int requested, int64_t items) {
  int64_t threads = requested;
  if (threads <= 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  if (threads > items)
    threads = items;
  return threads < 1 ? 1 : static_cast<int>(threads);
}

void parallelFor(int64_t count, int threads, const std::function<void(int64_t)>& body) {
  if (count <= 0)
    return;
  const int workers = resolveThreads(threads, count);
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1))
      body(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < workers; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break; // fewer threads, same results: the calling thread takes the rest
    }
  }
  work();
  for (std::thread& thread : pool)
    thread.join();
}

} // namespace quant
} // namespace ninfer
