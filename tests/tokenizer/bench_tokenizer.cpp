// Encoding speed, single-threaded: imports a checkpoint's tokenizer the way
// ninferc does (compiler/TokenizerImport.cpp), packs it into a flatbuffer as a
// plan would carry it, builds the runtime tokenizer and encodes a text file
// repeatedly. Prints one line per tokenizer; scripts/bench_tokenizer.py runs it
// next to Hugging Face tokenizers / sentencepiece. Not a test: no timing is
// asserted anywhere.
//
//   bench_tokenizer [--repeats N] [--lines] <text file> <tokenizer dir>...
//
// The first pass runs on a cold word cache and is reported separately; the
// rest are reported as the median. --lines encodes each line as its own call
// (prompt-sized inputs) instead of the whole file at once.
#include "TokenizerImport.h"
#include "ninfer/Tokenizer.h"
#include "plan_generated.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace ninfer;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string_view> splitLines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    lines.emplace_back(text.data() + start, end - start);
    start = end;
  }
  return lines;
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_tokenizer [--repeats N] [--lines] <text file> <tokenizer dir>...\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  int repeats = 10;
  bool lines = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc)
      repeats = std::max(2, std::atoi(argv[++i]));
    else if (arg == "--lines")
      lines = true;
    else if (!arg.empty() && arg[0] == '-')
      return usage();
    else
      args.push_back(arg);
  }
  if (args.size() < 2)
    return usage();
  const std::string text = readFile(args[0]);
  if (text.empty()) {
    std::fprintf(stderr, "bench_tokenizer: cannot read %s or it is empty\n", args[0].c_str());
    return 1;
  }
  const std::vector<std::string_view> pieces =
      lines ? splitLines(text) : std::vector<std::string_view>{text};
  const double megabytes = text.size() / 1e6;

  for (size_t t = 1; t < args.size(); ++t) {
    const std::string& dir = args[t];
    auto table = importTokenizer(dir, ModelConfig{});
    if (!table) {
      std::fprintf(stderr, "bench_tokenizer: %s: %s\n", dir.c_str(),
                   llvm::toString(table.takeError()).c_str());
      return 1;
    }
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(plan::Tokenizer::Pack(builder, table->get()));
    auto tokenizer =
        Tokenizer::fromPlan(flatbuffers::GetRoot<plan::Tokenizer>(builder.GetBufferPointer()));
    if (!tokenizer.isOk()) {
      std::fprintf(stderr, "bench_tokenizer: %s: %s\n", dir.c_str(),
                   tokenizer.status().message().c_str());
      return 1;
    }
    std::vector<double> seconds;
    size_t tokens = 0;
    for (int r = 0; r < repeats; ++r) {
      auto start = std::chrono::steady_clock::now();
      size_t count = 0;
      for (std::string_view piece : pieces) {
        auto ids = (*tokenizer)->encode(piece, /*addSpecial=*/false);
        if (!ids.isOk()) {
          std::fprintf(stderr, "bench_tokenizer: %s\n", ids.status().message().c_str());
          return 1;
        }
        count += ids->size();
      }
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      tokens = count;
    }
    double cold = seconds[0];
    std::vector<double> warm(seconds.begin() + 1, seconds.end());
    std::sort(warm.begin(), warm.end());
    double median = warm[warm.size() / 2];
    std::printf("%s\t%zu tokens\tcold %.2f MB/s\twarm %.2f MB/s\n", dir.c_str(), tokens,
                megabytes / cold, megabytes / median);
  }
  return 0;
}
