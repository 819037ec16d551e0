// NVRTC driver: see Nvrtc.h. One nvrtcProgram per call; the embedded device
// sources are handed over as in-memory headers, so no -I and no CUDA include
// directory is needed at run time.
#include "Nvrtc.h"

#include "DeviceSources.h"

#include <nvrtc.h>

#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace ninfer {
namespace nvrtc {
namespace {

struct Cache {
  std::mutex mutex;
  std::map<std::string, std::string> entries; // key -> code
};

Cache &cache() {
  static Cache instance;
  return instance;
}

std::string cacheKey(const std::string &source, const std::string &arch,
                     const std::vector<std::string> &options) {
  // The full text is the key: collisions are impossible and sources are small.
  std::string key = arch;
  for (const std::string &option : options) {
    key += '\0';
    key += option;
  }
  key += '\0';
  key += source;
  return key;
}

std::string errorText(nvrtcResult result) { return nvrtcGetErrorString(result); }

} // namespace

int archNumber(const std::string &arch) {
  size_t start = 0;
  if (arch.rfind("sm_", 0) == 0)
    start = 3;
  else if (arch.rfind("compute_", 0) == 0)
    start = 8;
  else
    return -1;
  size_t end = start;
  while (end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[end])))
    ++end;
  if (end == start || end - start > 4)
    return -1;
  const std::string rest = arch.substr(end);
  if (!rest.empty() && rest != "a" && rest != "f")
    return -1;
  return std::stoi(arch.substr(start, end - start));
}

std::string version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

Result<std::string> compile(const std::string &source, const std::string &programName,
                            const std::string &arch, const std::vector<std::string> &extraOptions) {
  const bool wantPtx = arch.rfind("compute_", 0) == 0;
  if (archNumber(arch) < 0)
    return Status::error("'" + arch +
                         "' is not a GPU architecture (expected e.g. sm_90 or compute_80)");

  std::vector<std::string> options = {"-arch=" + arch, "-std=c++17", "-DNINFER_DEVICE_CODE=1"};
  options.insert(options.end(), extraOptions.begin(), extraOptions.end());
  const std::string key = cacheKey(source, arch, options);
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    auto it = cache().entries.find(key);
    if (it != cache().entries.end())
      return it->second;
  }

  std::vector<const char *> headerTexts, headerNames;
  for (int i = 0; i < kDeviceSourceCount; ++i) {
    headerNames.push_back(kDeviceSources[i].name);
    headerTexts.push_back(kDeviceSources[i].text);
  }
  nvrtcProgram program = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&program, source.c_str(), programName.c_str(),
                                      static_cast<int>(headerTexts.size()), headerTexts.data(),
                                      headerNames.data());
  if (rc != NVRTC_SUCCESS)
    return Status::error("NVRTC could not create program '" + programName + "': " + errorText(rc));
  std::unique_ptr<nvrtcProgram, std::function<void(nvrtcProgram *)>> guard(
      &program, [](nvrtcProgram *p) { nvrtcDestroyProgram(p); });

  std::vector<const char *> optionPtrs;
  for (const std::string &option : options)
    optionPtrs.push_back(option.c_str());
  rc = nvrtcCompileProgram(program, static_cast<int>(optionPtrs.size()), optionPtrs.data());

  std::string log;
  size_t logSize = 0;
  if (nvrtcGetProgramLogSize(program, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    log.resize(logSize);
    if (nvrtcGetProgramLog(program, &log[0]) != NVRTC_SUCCESS)
      log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
      log.pop_back();
  }
  if (rc != NVRTC_SUCCESS) {
    std::string message = "NVRTC " + version() + " failed to compile '" + programName + "' for " +
                          arch + ": " + errorText(rc);
    if (!log.empty())
      message += "\n" + log;
    return Status::error(message);
  }

  std::string code;
  if (wantPtx) {
    size_t size = 0;
    rc = nvrtcGetPTXSize(program, &size);
    if (rc == NVRTC_SUCCESS) {
      code.resize(size);
      rc = nvrtcGetPTX(program, &code[0]);
    }
    while (!code.empty() && code.back() == '\0')
      code.pop_back();
  } else {
    size_t size = 0;
    rc = nvrtcGetCUBINSize(program, &size);
    if (rc == NVRTC_SUCCESS) {
      code.resize(size);
      rc = nvrtcGetCUBIN(program, &code[0]);
    }
  }
  if (rc != NVRTC_SUCCESS)
    return Status::error("NVRTC produced no " + std::string(wantPtx ? "PTX" : "cubin") + " for '" +
                         programName + "' (" + arch + "): " + errorText(rc));
  if (code.empty())
    return Status::error("NVRTC produced an empty " + std::string(wantPtx ? "PTX" : "cubin") +
                         " for '" + programName + "' (" + arch + ")");
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    cache().entries.emplace(key, code);
  }
  return code;
}

} // namespace nvrtc
} // namespace ninfer
