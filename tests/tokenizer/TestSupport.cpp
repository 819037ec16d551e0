// Golden file parsing and shared fixtures for tokenizer_tests.
#include "TestSupport.h"

#include "Utf8.h"

#include <fstream>
#include <functional>
#include <sstream>

namespace ninfer {
namespace test {
namespace {

bool fromHex(const std::string& hex, std::string& out) {
  if (hex.size() % 2 != 0)
    return false;
  out.clear();
  for (size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return true;
}

template <typename T> std::string hashValues(const std::vector<T>& values) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (T value : values) {
    uint32_t v = static_cast<uint32_t>(value);
    for (int k = 0; k < 4; ++k) {
      h ^= (v >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  char buf[17];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

} // namespace

std::string fnv1a64(const std::vector<int64_t>& values) { return hashValues(values); }
std::string fnv1a64(const std::vector<int32_t>& values) { return hashValues(values); }

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string sharedPath(const std::string& relative) {
  return std::string(NINFER_SHARED_DIR) + "/" + relative;
}

namespace {

// Calls handle(tag, fields, line) for every line of `path` that is not blank or a comment
// (fields: the rest of the line); it returns "" or what is wrong, which ends the reading.
bool readGoldenLines(const std::string& path,
                     const std::function<std::string(const std::string&, std::istringstream&,
                                                     const std::string&)>& handle,
                     std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string tag;
    fields >> tag;
    if (tag.empty() || tag[0] == '#')
      continue;
    error = handle(tag, fields, line);
    if (!error.empty())
      return false;
  }
  return true;
}

// "case NAME HEX": the name and the text of a case.
std::string readCase(std::istringstream& fields, const std::string& line, std::string& name,
                     std::string& text) {
  std::string hex;
  fields >> name >> hex;
  return fromHex(hex, text) ? "" : "bad hex in " + line.substr(0, 60);
}

void readIds(std::istringstream& fields, std::vector<int32_t>& ids) {
  int32_t id;
  while (fields >> id)
    ids.push_back(id);
}

} // namespace

bool loadGoldens(Goldens& goldens, std::string& error) {
  const std::string path = std::string(NINFER_TOKENIZER_TEST_DIR) + "/tokenizer_goldens.txt";
  auto handle = [&](const std::string& tag, std::istringstream& fields,
                    const std::string& line) -> std::string {
    if (tag == "case") {
      GoldenCase c;
      const std::string bad = readCase(fields, line, c.name, c.text);
      goldens.cases.push_back(std::move(c));
      return bad;
    }
    if (tag == "ids" && !goldens.cases.empty()) {
      readIds(fields, goldens.cases.back().ids);
    } else if (tag == "pieces" && !goldens.cases.empty()) {
      std::string kind;
      fields >> kind;
      auto& lengths = goldens.cases.back().pieceLengths[kind];
      int64_t length;
      while (fields >> length)
        lengths.push_back(length);
    } else if (tag == "chunk") {
      GoldenChunk chunk;
      fields >> chunk.offset >> chunk.length >> chunk.count >> chunk.hash;
      goldens.chunks.push_back(chunk);
    } else if (tag == "sweep") {
      fields >> goldens.sweepCount >> goldens.sweepHash;
    } else if (tag == "sweeppieces") {
      std::string kind;
      size_t count;
      std::string hash;
      fields >> kind >> count >> hash;
      goldens.sweepPieces[kind] = {count, hash};
    } else {
      return "unexpected line in " + path + ": " + line.substr(0, 40);
    }
    return "";
  };
  if (!readGoldenLines(path, handle, error))
    return false;
  if (goldens.cases.empty() || goldens.chunks.empty() || goldens.sweepHash.empty()) {
    error = path + " is incomplete";
    return false;
  }
  return true;
}

std::string fnv1a64Bytes(std::string_view text) {
  std::vector<int32_t> values;
  values.reserve(text.size());
  for (unsigned char c : text)
    values.push_back(c);
  return hashValues(values);
}

std::string testDataPath(const std::string& relative) {
  return std::string(NINFER_TOKENIZER_TEST_DIR) + "/" + relative;
}

bool loadParityGoldens(const std::string& name, ParityGoldens& goldens, std::string& error) {
  const std::string path = testDataPath("goldens/" + name + ".txt");
  auto handle = [&](const std::string& tag, std::istringstream& fields,
                    const std::string& line) -> std::string {
    if (tag == "reference") {
      std::getline(fields, goldens.reference);
    } else if (tag == "case") {
      ParityGoldens::Case c;
      const std::string bad = readCase(fields, line, c.name, c.text);
      goldens.cases.push_back(std::move(c));
      return bad;
    } else if (tag == "ids" && !goldens.cases.empty()) {
      readIds(fields, goldens.cases.back().ids);
    } else if (tag == "decoded" && !goldens.cases.empty()) {
      std::string hex;
      fields >> hex;
      if (hex != "-" && !fromHex(hex, goldens.cases.back().decoded))
        return "bad hex in " + line.substr(0, 60);
    } else if (tag == "chunk") {
      ParityGoldens::Span span;
      fields >> span.offset >> span.length >> span.count >> span.hash >> span.decodedLength >>
          span.decodedHash;
      goldens.chunks.push_back(span);
    } else if (tag == "text") {
      ParityGoldens::Span span;
      fields >> span.name >> span.count >> span.hash >> span.decodedLength >> span.decodedHash;
      goldens.texts.push_back(span);
    } else {
      return "unexpected line in " + path + ": " + line.substr(0, 40);
    }
    if ((tag == "chunk" || tag == "text") && fields.fail())
      return "malformed line in " + path + ": " + line.substr(0, 40);
    return "";
  };
  if (!readGoldenLines(path, handle, error))
    return false;
  if (goldens.cases.empty() || goldens.chunks.empty() || goldens.texts.empty()) {
    error = path + " is incomplete";
    return false;
  }
  return true;
}

std::string sweepText() {
  static const char* const separators[] = {"", " ", "a", "", "1", "  ", "\n", "'s", "\r\n "};
  const size_t count = sizeof(separators) / sizeof(separators[0]);
  std::string out;
  size_t k = 0;
  for (char32_t cp = 0; cp < 0x110000; cp += 13, ++k) {
    if (cp >= 0xD800 && cp < 0xE000)
      continue;
    utf8::append(out, cp);
    out += separators[k % count];
  }
  return out;
}

plan::TokenizerT tinyTable(bool addBos) {
  // bytes_to_unicode written out independently of the runtime's version.
  std::vector<char32_t> byteCodePoints(256);
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    byteCodePoints[b] = printable ? b : next++;
  }
  plan::TokenizerT table;
  table.kind = plan::TokenizerKind::ByteLevelBpe;
  table.pretokenizer = "gpt2";
  for (unsigned b = 0; b < 256; ++b) {
    std::string text;
    utf8::append(text, byteCodePoints[b]);
    table.tokens.push_back(text);
  }
  table.tokens.push_back("ab");  // 256
  table.tokens.push_back("abc"); // 257
  table.tokens.push_back("<s>"); // 258
  table.merges = {'a', 'b', 256, 'c'};
  table.special_ids = {258};
  table.bos_id = 258;
  table.add_bos = addBos;
  table.eos_ids = {258};
  return table;
}

Result<std::unique_ptr<Tokenizer>> tokenizerFrom(const plan::TokenizerT& table) {
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(plan::Tokenizer::Pack(builder, &table));
  return Tokenizer::fromPlan(flatbuffers::GetRoot<plan::Tokenizer>(builder.GetBufferPointer()));
}

} // namespace test
} // namespace ninfer
