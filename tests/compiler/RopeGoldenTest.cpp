// computeRopeTables against the tables transformers computes for the same
// config.json (rope_goldens.json, written by make_rope_goldens.py): every RoPE
// type, both config styles, and each family.
#include "ModelConfig.h"
#include "TestUtil.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace ninfer;
using ninfer::test::errorText;

namespace {

struct Golden {
  std::string name;
  std::string configJson;
  std::vector<double> invFreq;
  double attentionFactor = 1.0;
};

std::vector<Golden> loadGoldens() {
  std::vector<Golden> goldens;
  auto buffer = llvm::MemoryBuffer::getFile(test::testDir() + "/rope_goldens.json");
  if (!buffer) {
    ADD_FAILURE() << "cannot read rope_goldens.json";
    return goldens;
  }
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    ADD_FAILURE() << llvm::toString(json.takeError());
    return goldens;
  }
  const llvm::json::Array* cases = json->getAsObject()->getArray("cases");
  for (const llvm::json::Value& entry : *cases) {
    const llvm::json::Object* object = entry.getAsObject();
    Golden golden;
    golden.name = object->getString("name")->str();
    llvm::raw_string_ostream os(golden.configJson);
    os << *object->get("config");
    os.flush();
    for (const llvm::json::Value& value : *object->getArray("inv_freq"))
      golden.invFreq.push_back(*value.getAsNumber());
    golden.attentionFactor = *object->getNumber("attention_factor");
    goldens.push_back(std::move(golden));
  }
  return goldens;
}

TEST(RopeGolden, MatchesTransformers) {
  std::vector<Golden> goldens = loadGoldens();
  ASSERT_GE(goldens.size(), 12u);
  for (const Golden& golden : goldens) {
    SCOPED_TRACE(golden.name);
    test::ScratchDir dir;
    llvm::Expected<ModelConfig> config =
        loadModelConfig(dir.write("config.json", golden.configJson));
    ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
    RopeTables tables = computeRopeTables(*config);
    ASSERT_EQ(tables.invFreq.size(), golden.invFreq.size());
    for (size_t i = 0; i < golden.invFreq.size(); ++i) {
      // transformers raises theta to a float32 exponent; we use double, so
      // allow a few float ulps (relative 4e-6 covers theta up to 1e6).
      EXPECT_NEAR(tables.invFreq[i], golden.invFreq[i], 4e-6 * golden.invFreq[i] + 1e-30)
          << "inv_freq[" << i << "]";
    }
    EXPECT_NEAR(tables.attentionFactor, golden.attentionFactor, 1e-6);
  }
}

// The goldens must exercise every scaling type, or a type could silently
// go untested when the file is regenerated.
TEST(RopeGolden, CoversEveryType) {
  std::set<RopeScaling::Type> seen;
  for (const Golden& golden : loadGoldens()) {
    test::ScratchDir dir;
    llvm::Expected<ModelConfig> config =
        loadModelConfig(dir.write("config.json", golden.configJson));
    ASSERT_TRUE(static_cast<bool>(config)) << errorText(config);
    seen.insert(config->rope.type);
  }
  EXPECT_EQ(seen.size(), 6u);
}

} // namespace
