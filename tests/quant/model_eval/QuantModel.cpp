// quant_model: runs the quantization core over a whole model's linear layers,
// for measurements with eval_model.py (calibration and scoring in PyTorch).
// Not part of the product; the quantization pass will do this from the weight
// store. Files are raw little-endian arrays named in a manifest:
//   tensor <name> <rows> <cols> <weights.f32> <input-group or ->
//   input <group> <cols> <hessian.f64> <meanabs.f32>
//
//   quant_model candidates <manifest> <outdir> <method> <formats> [awq]
//     method: rtn | gptq | gptq-act. For every tensor and format writes
//     <outdir>/<name>.<format>.f32 (the dequantized weights, with AWQ the
//     effective weights Q(W s) / s) and appends "name format bytes relerr" to
//     <outdir>/errors.tsv. Tensors without an input group get RTN.
//   quant_model allocate <errors.tsv> <sensitivity.tsv> <budget-bits> <choice.tsv>
//     error of (tensor, format) = sensitivity(tensor) * relerr; writes
//     "name format" for the allocation within the budget.
#include "Awq.h"
#include "BitAllocator.h"
#include "Gptq.h"
#include "QuantError.h"
#include "Rtn.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ninfer;
using namespace ninfer::quant;

namespace {

template <typename T> bool readArray(const std::string& path, size_t count, std::vector<T>& out) {
  std::ifstream f(path, std::ios::binary);
  out.resize(count);
  f.read(reinterpret_cast<char*>(out.data()), count * sizeof(T));
  return f.gcount() == static_cast<std::streamsize>(count * sizeof(T));
}

bool writeArray(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return static_cast<bool>(f);
}

struct Tensor {
  std::string name, weights, group;
  int64_t rows, cols;
};
struct Input {
  std::string hessian, meanAbs;
  int64_t cols;
};

bool parseFormat(const std::string& text, QuantSpec& spec) {
  return std::sscanf(text.c_str(), "q%d_g%d", &spec.bits, &spec.groupSize) == 2 &&
         quantFormatIndex(spec.bits, spec.groupSize) >= 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    out.push_back(item);
  return out;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "quant_model: %s\n", message.c_str());
  return 1;
}

int candidates(const std::string& manifest, const std::string& outDir, const std::string& method,
               const std::string& formatList, bool awq) {
  std::vector<Tensor> tensors;
  std::map<std::string, Input> inputs;
  std::ifstream f(manifest);
  for (std::string line; std::getline(f, line);) {
    std::stringstream ss(line);
    std::string kind;
    ss >> kind;
    if (kind == "tensor") {
      Tensor t;
      ss >> t.name >> t.rows >> t.cols >> t.weights >> t.group;
      tensors.push_back(t);
    } else if (kind == "input") {
      std::string group;
      Input in;
      ss >> group >> in.cols >> in.hessian >> in.meanAbs;
      inputs[group] = in;
    }
  }
  std::vector<QuantSpec> specs;
  for (const std::string& name : split(formatList, ',')) {
    QuantSpec spec;
    if (!parseFormat(name, spec))
      return fail("bad format " + name);
    specs.push_back(spec);
  }
  std::ofstream errors(outDir + "/errors.tsv", std::ios::app);
  std::map<std::string, std::vector<double>> hessians;
  std::map<std::string, std::vector<float>> meanAbs;
  for (const auto& [group, in] : inputs) {
    if (!readArray(in.hessian, in.cols * in.cols, hessians[group]) ||
        !readArray(in.meanAbs, in.cols, meanAbs[group]))
      return fail("cannot read the statistics of " + group);
  }
  std::map<std::string, std::vector<float>> weights;
  for (const Tensor& t : tensors)
    if (!readArray(t.weights, t.rows * t.cols, weights[t.name]))
      return fail("cannot read " + t.weights);

  for (const QuantSpec& spec : specs) {
    const std::string fmt = quantFormatTraits(spec.formatId()).name;
    // AWQ scales per input group (only groups whose producer is a norm can fold them).
    std::map<std::string, std::vector<float>> awqScales;
    if (awq) {
      std::map<std::string, std::vector<AwqTensor>> members;
      for (const Tensor& t : tensors)
        if (t.group.find("attn_in") != std::string::npos ||
            t.group.find("mlp_in") != std::string::npos)
          members[t.group].push_back({weights[t.name].data(), t.rows});
      for (auto& [group, list] : members) {
        Result<AwqResult> a = searchAwqScales(list, inputs[group].cols, hessians[group].data(),
                                              meanAbs[group].data(), spec);
        if (!a.isOk())
          return fail(a.status().message());
        std::printf("awq %s %s alpha %.2f error %.4g -> %.4g\n", group.c_str(), fmt.c_str(),
                    a->alpha, a->baseError, a->bestError);
        awqScales[group] = a->scales;
      }
    }
    for (const Tensor& t : tensors) {
      const std::vector<float>& w = weights[t.name];
      std::vector<float> dq;
      uint64_t bytes = 0;
      double relerr = -1.0;
      if (t.group == "-" || method == "rtn") {
        const float* importance = nullptr;
        std::vector<float> diag;
        if (t.group != "-") {
          diag.resize(t.cols);
          for (int64_t j = 0; j < t.cols; ++j)
            diag[j] = static_cast<float>(hessians[t.group][j * t.cols + j]);
          importance = diag.data();
        }
        Result<QuantizedTensor> q = quantizeRtn(w.data(), t.rows, t.cols, spec, importance);
        if (!q.isOk())
          return fail(t.name + ": " + q.status().message());
        dq = q->dequantized;
        bytes = q->packed.size();
      } else {
        GptqOptions options;
        options.actOrder = method == "gptq-act";
        const std::vector<double>& h = hessians[t.group];
        auto it = awqScales.find(t.group);
        if (it != awqScales.end()) {
          const std::vector<float>& s = it->second;
          const std::vector<float> ws = scaleColumns(w.data(), t.rows, t.cols, s.data());
          const std::vector<double> hs = scaleHessian(h.data(), t.cols, s.data());
          Result<GptqResult> g = quantizeGptq(ws.data(), t.rows, t.cols, hs.data(), spec, options);
          if (!g.isOk())
            return fail(t.name + ": " + g.status().message());
          dq = g->tensor.dequantized;
          for (int64_t i = 0; i < t.rows * t.cols; ++i)
            dq[i] /= s[i % t.cols];
          bytes = g->tensor.packed.size();
        } else {
          Result<GptqResult> g = quantizeGptq(w.data(), t.rows, t.cols, h.data(), spec, options);
          if (!g.isOk())
            return fail(t.name + ": " + g.status().message());
          dq = g->tensor.dequantized;
          bytes = g->tensor.packed.size();
        }
      }
      if (t.group != "-") {
        relerr =
            *relativeOutputError(w.data(), dq.data(), t.rows, t.cols, hessians[t.group].data());
      } else { // no input statistics (embedding table): relative squared error
        double num = 0.0, den = 0.0;
        for (int64_t i = 0; i < t.rows * t.cols; ++i) {
          num += double(w[i] - dq[i]) * (w[i] - dq[i]);
          den += double(w[i]) * w[i];
        }
        relerr = num / den;
      }
      if (!writeArray(outDir + "/" + t.name + "." + fmt + ".f32", dq))
        return fail("cannot write " + t.name);
      errors << t.name << '\t' << fmt << '\t' << bytes << '\t' << relerr << '\n';
    }
  }
  return 0;
}

int allocate(const std::string& errorsPath, const std::string& sensPath, uint64_t budgetBits,
             const std::string& choicePath) {
  std::map<std::string, double> sensitivity;
  {
    std::ifstream f(sensPath);
    std::string name;
    double s;
    while (f >> name >> s)
      sensitivity[name] = s;
  }
  std::vector<AllocTensor> tensors;
  std::map<std::string, size_t> index;
  std::vector<std::vector<std::string>> formatNames;
  std::ifstream f(errorsPath);
  std::string name, fmt;
  uint64_t bytes;
  double relerr;
  while (f >> name >> fmt >> bytes >> relerr) {
    if (!sensitivity.count(name))
      return fail("no sensitivity for " + name);
    if (!index.count(name)) {
      index[name] = tensors.size();
      tensors.push_back({name, sensitivity[name], {}});
      formatNames.emplace_back();
    }
    const size_t t = index[name];
    tensors[t].candidates.push_back({static_cast<int>(formatNames[t].size()), relerr, bytes});
    formatNames[t].push_back(fmt);
  }
  Result<Allocation> a = allocateBits(tensors, budgetBits);
  if (!a.isOk())
    return fail(a.status().message());
  std::ofstream out(choicePath);
  for (size_t t = 0; t < tensors.size(); ++t)
    out << tensors[t].name << '\t' << formatNames[t][a->choice[t]] << '\n';
  std::printf("allocated %llu of %llu bits, weighted error %.6g\n",
              static_cast<unsigned long long>(a->totalBytes * 8),
              static_cast<unsigned long long>(budgetBits), a->totalError);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto start = std::chrono::steady_clock::now();
  int rc = 2;
  if (args.size() >= 5 && args[0] == "candidates")
    rc = candidates(args[1], args[2], args[3], args[4], args.size() > 5 && args[5] == "awq");
  else if (args.size() == 5 && args[0] == "allocate")
    rc = allocate(args[1], args[2], std::stoull(args[3]), args[4]);
  else
    std::fprintf(stderr, "usage: see the comment at the top of QuantModel.cpp\n");
  std::fprintf(stderr, "quant_model %s: %.1f s\n", args.empty() ? "" : args[0].c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return rc;
}
