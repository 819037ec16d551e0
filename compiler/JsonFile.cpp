// See JsonFile.h.
#include "JsonFile.h"

#include "llvm/Support/MemoryBuffer.h"

namespace ninfer {

llvm::Error compilerError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::string> readTextFile(const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return compilerError("cannot read " + path + ": " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

llvm::Expected<llvm::json::Value> readJsonFile(const std::string& path) {
  auto text = readTextFile(path);
  if (!text)
    return text.takeError();
  auto value = llvm::json::parse(*text);
  if (!value)
    return compilerError(path + ": invalid JSON: " + llvm::toString(value.takeError()));
  return std::move(*value);
}

std::optional<std::string> specialTokenText(const llvm::json::Object& config, llvm::StringRef key) {
  const llvm::json::Value* value = config.get(key);
  if (!value)
    return std::nullopt;
  if (auto text = value->getAsString())
    return text->str();
  if (const llvm::json::Object* object = value->getAsObject())
    if (auto text = object->getString("content"))
      return text->str();
  return std::nullopt;
}

} // namespace ninfer
