// A fixed pool of worker threads for the CPU executor, created once. parallelFor
// hands out contiguous chunks of a task range; the calling thread works too.
// Results never depend on the chunking: every task computes its own outputs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ninfer {

// A non-owning reference to a callable (no allocation, unlike std::function).
class ChunkFn {
public:
  template <typename F>
  ChunkFn(const F& fn) // NOLINT: implicit on purpose, lambdas pass straight in
      : object_(&fn), call_([](const void* o, int64_t begin, int64_t end, int worker) {
          (*static_cast<const F*>(o))(begin, end, worker);
        }) {}
  void operator()(int64_t begin, int64_t end, int worker) const {
    call_(object_, begin, end, worker);
  }

private:
  const void* object_;
  void (*call_)(const void*, int64_t, int64_t, int);
};

class CpuThreadPool {
public:
  // threads: total threads including the caller (>= 1).
  explicit CpuThreadPool(int threads);
  ~CpuThreadPool();
  CpuThreadPool(const CpuThreadPool&) = delete;
  CpuThreadPool& operator=(const CpuThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Calls fn(begin, end, worker) over [0, tasks) split into chunks of at least
  // minChunk tasks; worker in [0, size()) identifies per-thread scratch.
  void parallelFor(int64_t tasks, int64_t minChunk, ChunkFn fn);

private:
  void workerLoop(int worker);
  void runChunks(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int busy_ = 0;
  // The current job, valid while busy_ > 0 or the caller is running chunks.
  const ChunkFn* job_ = nullptr;
  int64_t tasks_ = 0;
  int64_t chunkSize_ = 1;
  std::atomic<int64_t> nextChunk_{0};
};

} // namespace ninfer
