// The CUDA-vs-CPU parity harness of the GPU op tests: which GPU is there (tests
// skip without one), random f32 input rows entering through an Embedding op, and
// a runner that emits the plan's kernels for the GPU, writes and opens the plan,
// runs both executors on the same tokens over several steps (prefill, then
// decode) and measures each step's logits for a normalized MSE,
// sum((gpu - cpu)^2) / sum(cpu^2), which callers bound per step or pooled.
#pragma once

#include "CudaDriver.h"
#include "TestPlan.h"
#include "ninfer/Executor.h"
#include "ninfer/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ninfer {
namespace test {

struct Gpu {
  bool usable = false;
  std::string why;
  std::string arch;     // the device's, e.g. sm_90
  std::string codeArch; // what the tests compile for: sm_90a on 9.0 (ninferc's h100/h200)
  std::string name;
};

// Device 0, queried once.
inline const Gpu &gpu() {
  static const Gpu info = [] {
    Gpu g;
    Result<const CudaDriver *> driver = CudaDriver::get();
    if (!driver) {
      g.why = driver.status().message();
      return g;
    }
    const CudaDriver &cu = **driver;
    int count = 0;
    if (cu.deviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
      g.why = "no CUDA device";
      return g;
    }
    CUdevice device;
    int major = 0, minor = 0;
    char name[256] = {0};
    if (cu.deviceGet(&device, 0) != CUDA_SUCCESS ||
        cu.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) !=
            CUDA_SUCCESS ||
        cu.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) !=
            CUDA_SUCCESS) {
      g.why = "cannot query CUDA device 0";
      return g;
    }
    cu.deviceGetName(name, sizeof(name) - 1, device);
    g.usable = true;
    g.arch = "sm_" + std::to_string(major * 10 + minor);
    g.codeArch = major * 10 + minor == 90 ? g.arch + "a" : g.arch;
    g.name = name;
    return g;
  }();
  return info;
}

#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    if (!::ninfer::test::gpu().usable)                                                             \
      GTEST_SKIP() << "no usable GPU: " << ::ninfer::test::gpu().why;                              \
  } while (0)

// Token ids of the parity steps are drawn from [0, kTokenVocab).
constexpr int kTokenVocab = 37;

// An f32 activation of `width` filled from a random table through an Embedding op.
inline uint32_t inputRows(TestPlan &t, const std::string &name, int width, std::mt19937 &rng,
                          float scale = 1.0f) {
  const uint32_t table = t.addWeight(name + ".table", plan::DType::F32, {kTokenVocab, width},
                                     randomValues(size_t(kTokenVocab) * width, scale, rng));
  return t.addEmbedding(name, table, kTokenVocab, width);
}

// Emits `t`'s kernels (by default for this GPU), writes the plan to a temporary file and
// opens it (the file is removed; the mapping stays valid). Null, with the failure reported
// with `what`, on error.
inline std::unique_ptr<PlanFile> emittedPlan(TestPlan &t, const std::string &what,
                                             KernelOptions options = {}) {
  if (options.archs.empty()) {
    options.archs = {gpu().codeArch};
    options.embedPtx = false;
  }
  Status emitted = emitKernels(t.plan, options);
  EXPECT_TRUE(emitted.isOk()) << what << ": " << emitted.message();
  if (!emitted.isOk())
    return nullptr;
  const std::string path = tempPlanPath("emitted");
  Status written = t.write(path);
  EXPECT_TRUE(written.isOk()) << what << ": " << written.message();
  if (!written.isOk())
    return nullptr;
  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(path);
  std::remove(path.c_str());
  EXPECT_TRUE(file.isOk()) << what << ": " << file.status().message();
  return file.isOk() ? std::move(*file) : nullptr;
}

// The squared error sum((gpu - cpu)^2) and the squared reference sum(cpu^2)
// of compared values; steps add up to a pooled error.
struct StepError {
  double err = INFINITY; // INFINITY: not run, or non-finite values
  double ref = 0.0;

  double nmse() const { return err / std::max(ref, 1e-30); }
  StepError &operator+=(const StepError &other) {
    err += other.err;
    ref += other.ref;
    return *this;
  }
};

// Runs `t` on both executors over `steps` (token counts; positions follow on)
// and returns each step's error over its compared values. Failures to emit,
// write, open or run the plan and non-finite values are reported with `what`
// (their steps keep err = INFINITY); bounds are the caller's.
inline std::vector<StepError> stepErrors(TestPlan &t, const std::vector<int> &steps,
                                         const std::string &what, KernelOptions options = {}) {
  std::vector<StepError> errors(steps.size());
  std::unique_ptr<PlanFile> file = emittedPlan(t, what, options);
  if (!file)
    return errors;
  Result<std::unique_ptr<Executor>> cpu = createCpuExecutor(*file, 0);
  EXPECT_TRUE(cpu.isOk()) << what << ": " << cpu.status().message();
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(*file, 0);
  EXPECT_TRUE(cuda.isOk()) << what << ": " << cuda.status().message();
  if (!cpu.isOk() || !cuda.isOk())
    return errors;

  const size_t vocab = size_t(t.plan.model->vocab_size);
  std::vector<float> expected(vocab), actual(vocab);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> token(0, kTokenVocab - 1);
  int pos = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const int n = steps[s];
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t &id : ids)
      id = token(rng);
    std::fill(actual.begin(), actual.end(), NAN);
    Status a = (*cpu)->forward(ids.data(), n, pos, expected.data());
    Status b = (*cuda)->forward(ids.data(), n, pos, actual.data());
    EXPECT_TRUE(a.isOk()) << what << ": cpu: " << a.message();
    EXPECT_TRUE(b.isOk()) << what << ": cuda: " << b.message();
    if (!a.isOk() || !b.isOk())
      return errors;
    const size_t count = t.comparedValues(n);
    double err = 0.0, ref = 0.0;
    bool finite = true;
    for (size_t i = 0; i < count; ++i) {
      finite = finite && std::isfinite(actual[i]) && std::isfinite(expected[i]);
      err += double(actual[i] - expected[i]) * double(actual[i] - expected[i]);
      ref += double(expected[i]) * double(expected[i]);
    }
    EXPECT_TRUE(finite) << what << ": step " << s << " (pos " << pos << ", n " << n
                        << ") has non-finite values";
    errors[s] = {finite ? err : INFINITY, ref};
    pos += n;
  }
  return errors;
}

} // namespace test
} // namespace ninfer
