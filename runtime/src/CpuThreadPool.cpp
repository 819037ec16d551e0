// The CPU executor's worker pool: workers sleep on a condition variable between
// jobs; a job is a task range handed out in chunks through an atomic counter.
#include "CpuThreadPool.h"

#include <algorithm>

namespace ninfer {

CpuThreadPool::CpuThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i)
    workers_.emplace_back([this, i] { workerLoop(i); });
}

CpuThreadPool::~CpuThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_)
    t.join();
}

void CpuThreadPool::runChunks(int worker) {
  const int64_t chunks = (tasks_ + chunkSize_ - 1) / chunkSize_;
  for (;;) {
    const int64_t chunk = nextChunk_.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= chunks)
      return;
    const int64_t begin = chunk * chunkSize_;
    (*job_)(begin, std::min(tasks_, begin + chunkSize_), worker);
  }
}

void CpuThreadPool::workerLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
    }
    runChunks(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0)
        done_.notify_one();
    }
  }
}

void CpuThreadPool::parallelFor(int64_t tasks, int64_t minChunk, ChunkFn fn) {
  if (tasks <= 0)
    return;
  minChunk = std::max<int64_t>(1, minChunk);
  if (workers_.empty() || tasks <= minChunk) {
    fn(0, tasks, 0);
    return;
  }
  // About four chunks per thread balances uneven chunks without much contention.
  const int64_t chunk = std::max(minChunk, (tasks + size() * 4 - 1) / (size() * 4));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    tasks_ = tasks;
    chunkSize_ = chunk;
    nextChunk_.store(0, std::memory_order_relaxed);
    busy_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  runChunks(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  job_ = nullptr;
}

} // namespace ninfer
