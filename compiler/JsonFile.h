// Reading the small text and JSON files of a checkpoint (config.json,
// tokenizer_config.json, tokenizer.json, ...), with errors that name the file.
#pragma once

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace ninfer {

// An llvm::Error carrying `message`.
llvm::Error compilerError(const llvm::Twine& message);

// "cannot read PATH: why" when the file cannot be read.
llvm::Expected<std::string> readTextFile(const std::string& path);

// Also "PATH: invalid JSON: why" when it does not parse.
llvm::Expected<llvm::json::Value> readJsonFile(const std::string& path);

// A special token's text in tokenizer_config.json, written as "text" or
// {"content": "text"}; nullopt where the key is absent, null or of another shape.
std::optional<std::string> specialTokenText(const llvm::json::Object& config, llvm::StringRef key);

} // namespace ninfer
