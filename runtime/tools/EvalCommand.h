// `ninfer perplexity` and `ninfer kld`: quality of a plan on a text file by
// llama.cpp's method (runtime/include/ninfer/Evaluation.h), so the numbers
// compare with shared/models/README.md. The commands print their own
// `ninfer: error: ...` line and return the exit code (0 ok, 1 failure,
// 2 bad usage); they never throw.
#pragma once

#include <cstdio>

namespace ninfer {

// ninfer perplexity PLAN --file TEXT [--ctx 512] [--max-chunks N] [--device cpu|cuda|auto]
//                   [--threads N] [--no-bos] [--json]
// argv[1] is "perplexity".
int runPerplexityCommand(int argc, char** argv);

// ninfer kld PLAN --ref REF.nplan --file TEXT [same options]
// KL(REF || PLAN) per scored position, both perplexities, top-token agreement.
// argv[1] is "kld".
int runKldCommand(int argc, char** argv);

// The same with explicit streams (tests): results go to `out`, progress, the
// device choice and errors to `err`.
int runPerplexityCommand(int argc, char** argv, std::FILE* out, std::FILE* err);
int runKldCommand(int argc, char** argv, std::FILE* out, std::FILE* err);

} // namespace ninfer
