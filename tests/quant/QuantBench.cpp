// quant_bench: figures for the quantization core, printed, never asserted.
//   quant_bench errors      relative output error tr(E H E^T) / tr(W H W^T) of
//                           RTN, RTN + importance, GPTQ, GPTQ act-order, for
//                           every format, on a synthetic correlated layer
//   quant_bench speed [n]   GPTQ on an n x n matrix (default 4096): factor and
//                           total time, one thread and all threads
#include "Gptq.h"
#include "HessianFactor.h"
#include "QuantError.h"
#include "QuantTestUtil.h"
#include "Rtn.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

using namespace ninfer::quant;

namespace {

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int errors() {
  const int64_t rows = 512, cols = 1024, samples = 4096;
  test::Rng rng(7);
  // Weights with a heavier tail than Gaussian (a few large weights), inputs
  // with rank-16 structure, 10% noise and a few strong channels.
  std::vector<float> w = test::gaussian(rng, rows * cols, 0.02);
  for (float& v : w)
    if (rng.uniform() < 0.01)
      v *= 5.0f;
  std::vector<double> channelScale(cols, 1.0);
  for (int64_t j = 0; j < cols; j += 97)
    channelScale[j] = 8.0;
  const std::vector<double> x = test::lowRankInputs(rng, samples, cols, 16, 0.1, channelScale);
  const std::vector<double> h = test::gram(x, samples, cols);
  const std::vector<float> importance = test::diagonal(h, cols);

  std::printf("synthetic layer %lld x %lld, inputs rank 16 + 10%% noise, %lld samples\n",
              (long long)rows, (long long)cols, (long long)samples);
  std::printf("relative output error tr(E H E^T) / tr(W H W^T)\n");
  std::printf("%-8s %6s %12s %12s %12s %12s %10s\n", "format", "bpw", "rtn", "rtn+imp", "gptq",
              "gptq-act", "gptq/rtn");
  for (int bits : {8, 4, 3, 2}) {
    for (int group : {128, 64, 32}) {
      const QuantSpec spec{bits, group};
      auto rel = [&](const std::vector<float>& q) {
        return *relativeOutputError(w.data(), q.data(), rows, cols, h.data());
      };
      const double rtn = rel(quantizeRtn(w.data(), rows, cols, spec, nullptr)->dequantized);
      const double rtnImp =
          rel(quantizeRtn(w.data(), rows, cols, spec, importance.data())->dequantized);
      GptqOptions options;
      const double gptq =
          rel(quantizeGptq(w.data(), rows, cols, h.data(), spec, options)->tensor.dequantized);
      options.actOrder = true;
      const double gptqAct =
          rel(quantizeGptq(w.data(), rows, cols, h.data(), spec, options)->tensor.dequantized);
      std::printf("q%d_g%-4d %6.3f %12.3e %12.3e %12.3e %12.3e %10.3f\n", bits, group,
                  spec.bitsPerWeight(), rtn, rtnImp, gptq, gptqAct,
                  std::min(gptq, gptqAct) / rtnImp);
    }
  }
  return 0;
}

int speed(int64_t n) {
  test::Rng rng(8);
  // H = B^T B + I with B [64, n]: positive definite, cheap to build.
  const int64_t rank = 64;
  std::vector<double> b(rank * n);
  for (double& v : b)
    v = rng.normal();
  std::vector<double> h(n * n, 0.0);
  for (int64_t r = 0; r < rank; ++r)
    for (int64_t i = 0; i < n; ++i) {
      const double bi = b[r * n + i];
      double* hi = &h[i * n];
      for (int64_t j = 0; j < n; ++j)
        hi[j] += bi * b[r * n + j];
    }
  for (int64_t i = 0; i < n; ++i)
    h[i * n + i] += 1.0;
  const std::vector<float> w = test::gaussian(rng, n * n, 0.02);
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int threads : {1, all}) {
    auto start = std::chrono::steady_clock::now();
    std::vector<double> work = h;
    std::vector<float> u;
    if (!gptqFactor(work, n, threads, u).isOk())
      return 1;
    const double factor = seconds(start);
    for (int bits : {4, 3}) {
      GptqOptions options;
      options.threads = threads;
      options.keepDequantized = false;
      start = std::chrono::steady_clock::now();
      ninfer::Result<GptqResult> g = quantizeGptq(w.data(), n, n, h.data(), {bits, 128}, options);
      const double total = seconds(start);
      if (!g.isOk()) {
        std::fprintf(stderr, "%s\n", g.status().message().c_str());
        return 1;
      }
      std::printf("gptq %lld x %lld q%d_g128, %d thread(s): factor %.2f s, total %.2f s\n",
                  (long long)n, (long long)n, bits, threads, factor, total);
    }
    if (all == 1)
      break;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "errors";
  if (what == "errors")
    return errors();
  if (what == "speed")
    return speed(argc > 2 ? std::atoll(argv[2]) : 4096);
  std::fprintf(stderr, "usage: quant_bench errors | speed [n]\n");
  return 2;
}
