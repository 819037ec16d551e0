// Helpers shared by the tokenizer tests: the golden file written by
// make_goldens.py, the Unicode sweep text it describes, and a hand-built
// byte-level tokenizer table for tests that must not need the compiler.
#pragma once

#include "ninfer/Tokenizer.h"
#include "plan_generated.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {
namespace test {

struct GoldenCase {
  std::string name;
  std::string text;
  std::vector<int32_t> ids;                                 // with special tokens
  std::map<std::string, std::vector<int64_t>> pieceLengths; // by pre-tokenizer name
};

struct GoldenChunk {
  size_t offset = 0;
  size_t length = 0;
  size_t count = 0;
  std::string hash;
};

struct Goldens {
  std::vector<GoldenCase> cases;
  std::vector<GoldenChunk> chunks; // the last one is the whole file
  size_t sweepCount = 0;
  std::string sweepHash;
  std::map<std::string, std::pair<size_t, std::string>> sweepPieces; // name -> count, hash
};

// Reads tests/tokenizer/tokenizer_goldens.txt; returns false with `error` set.
bool loadGoldens(Goldens& goldens, std::string& error);

// goldens/<name>.txt as written by make_goldens.py for the other tokenizers.
struct ParityGoldens {
  struct Case {
    std::string name;
    std::string text;
    std::vector<int32_t> ids; // with special tokens
    std::string decoded;      // reference decode of the ids without special tokens
  };
  struct Span {
    std::string name;              // texts: sweep, multilingual, nfc_fuzz
    size_t offset = 0, length = 0; // chunks of heldout_python.txt
    size_t count = 0;
    std::string hash;
    size_t decodedLength = 0;
    std::string decodedHash;
  };
  std::string reference;
  std::vector<Case> cases;
  std::vector<Span> chunks; // the last one is the whole file
  std::vector<Span> texts;
};
bool loadParityGoldens(const std::string& name, ParityGoldens& goldens, std::string& error);

// FNV-1a 64 over the bytes of `text` (each as a value), as make_goldens.py's bytes_hash.
std::string fnv1a64Bytes(std::string_view text);

// tests/tokenizer/<relative>.
std::string testDataPath(const std::string& relative);

// Same hash as make_goldens.py: FNV-1a 64 over each value as 4 little-endian bytes.
std::string fnv1a64(const std::vector<int64_t>& values);
std::string fnv1a64(const std::vector<int32_t>& values);

// make_goldens.py's sweep_text().
std::string sweepText();

std::string readFile(const std::string& path);
std::string sharedPath(const std::string& relative);

// A byte-level BPE table with the 256 byte tokens (ids 0..255 in byte order,
// stored through bytes_to_unicode), merges of ("a","b")->"ab" and ("ab","c")->"abc",
// and the special token "<s>" (BOS when addBos).
plan::TokenizerT tinyTable(bool addBos);

// Packs `table` into a flatbuffer and builds the runtime tokenizer from it, as
// the runtime does from a loaded plan.
Result<std::unique_ptr<Tokenizer>> tokenizerFrom(const plan::TokenizerT& table);

} // namespace test
} // namespace ninfer
