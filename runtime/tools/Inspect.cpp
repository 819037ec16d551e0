// `ninfer inspect`: what a plan holds (model, limits, memory plan, buffers, ops,
// kernel module, tokenizer), as text or as hand-written JSON.
#include "CliCommon.h"

#include "ninfer/Json.h"
#include "ninfer/Plan.h"
#include "plan_generated.h"

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer {
namespace cli {
namespace {

const char kInspectHelp[] = R"(ninfer inspect: describe what a plan holds, without running it

usage:
  ninfer inspect PLAN [--json]

Prints the model (architecture and shapes), the plan's limits (context, step tokens, sequences),
its memory plan and buffers, its ops, the kernel module (cubin architectures, PTX) and the
tokenizer.

options:
  --json                print one JSON object instead of the text report
)";

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::string opKind(plan::OpAttrs kind) {
  std::string name = plan::EnumNameOpAttrs(kind);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, "Attrs") == 0)
    name.resize(name.size() - 5);
  return name;
}

template <typename V> std::string list(const V* values) {
  std::string text = "[";
  if (values)
    for (uint32_t i = 0; i < values->size(); ++i)
      text += (i ? ", " : "") + std::to_string(values->Get(i));
  return text + "]";
}

double mib(uint64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

// The facts both output formats print, gathered once.
struct PlanSummary {
  std::vector<std::pair<std::string, int>> buffersByKind; // in enum order
  std::vector<std::string> cubinArchs;
  uint32_t functionCount = 0;
  bool hasPtx = false;
  std::string ptxArch;
  size_t sourceBytes = 0;
};

PlanSummary summarize(const plan::Plan& p) {
  PlanSummary s;
  for (plan::BufferKind kind : plan::EnumValuesBufferKind()) {
    int count = 0;
    for (const plan::Buffer* b : *p.buffers())
      count += b->kind() == kind;
    s.buffersByKind.emplace_back(plan::EnumNameBufferKind(kind), count);
  }
  if (const plan::KernelModule* k = p.kernels()) {
    s.functionCount = k->functions() ? k->functions()->size() : 0;
    if (k->cubins())
      for (const plan::CodeObject* c : *k->cubins())
        s.cubinArchs.push_back(str(c->arch()));
    s.hasPtx = k->ptx() && k->ptx()->size() > 0;
    s.ptxArch = str(k->ptx_arch());
    s.sourceBytes = k->source() ? k->source()->size() : 0;
  }
  return s;
}

void printInspectText(const PlanFile& file) {
  const plan::Plan& p = file.plan();
  const plan::ModelInfo& m = *p.model();
  const plan::MemoryPlan& mem = *p.memory();
  const PlanSummary s = summarize(p);
  std::printf("plan:            %s (%llu bytes)\n", file.path().c_str(),
              (unsigned long long)file.fileSize());
  std::printf("format version:  %u\n", p.format_version());
  std::printf("compiler:        %s\n", str(p.compiler()).c_str());
  std::printf("target:          %s\n", str(p.target()).c_str());
  std::printf("model:           %s from %s\n", str(m.family()).c_str(), str(m.source()).c_str());
  std::printf("  vocab %d, hidden %d, layers %d, heads %d, kv_heads %d, head_dim %d, "
              "intermediate %d, parameters %llu\n",
              m.vocab_size(), m.hidden_size(), m.layers(), m.heads(), m.kv_heads(), m.head_dim(),
              m.intermediate_size(), (unsigned long long)m.parameters());
  std::printf("context:         %d\n", p.context());
  std::printf("max_step_tokens: %d\n", p.max_step_tokens());
  std::printf("max_batch:       %d (sequences: KV-cache slots, rows of a batch step)\n",
              p.max_batch());
  std::printf("dummy weights:   %s\n", p.dummy_weights() ? "yes" : "no");
  std::printf("memory (MiB):    weights %.2f, activations %.2f, kv %.2f%s, workspace %.2f\n",
              mib(mem.weight_bytes()), mib(mem.activation_bytes()), mib(mem.kv_bytes()),
              p.max_batch() > 1 ? (" (" + std::to_string(p.max_batch()) + " sequences)").c_str()
                                : "",
              mib(mem.workspace_bytes()));
  std::printf("buffers:         %u (", p.buffers()->size());
  bool first = true;
  for (const auto& [kind, count] : s.buffersByKind) {
    std::printf("%s%s %d", first ? "" : ", ", kind.c_str(), count);
    first = false;
  }
  std::printf(")\n");
  std::printf("ops:             %u\n", p.ops()->size());
  for (uint32_t i = 0; i < p.ops()->size(); ++i) {
    const plan::Op* op = p.ops()->Get(i);
    std::printf("  %4u %-10s %-32s %s -> %s\n", i, opKind(op->attrs_type()).c_str(),
                str(op->name()).c_str(), list(op->inputs()).c_str(), list(op->outputs()).c_str());
  }
  std::string archs;
  for (const std::string& a : s.cubinArchs)
    archs += (archs.empty() ? "" : ", ") + a;
  std::printf("kernels:         %u functions, cubins [%s], ptx %s, source %zu bytes\n",
              s.functionCount, archs.c_str(), s.hasPtx ? ("yes (" + s.ptxArch + ")").c_str() : "no",
              s.sourceBytes);
  const plan::Tokenizer* t = p.tokenizer();
  if (!t) {
    std::printf("tokenizer:       none\n");
    return;
  }
  std::printf("tokenizer:       %s, %u tokens, %u merges, bos %d%s, eos %s, pretokenizer %s\n",
              plan::EnumNameTokenizerKind(t->kind()), t->tokens() ? t->tokens()->size() : 0,
              t->merges() ? t->merges()->size() / 2 : 0, t->bos_id(),
              t->add_bos() ? " (added)" : "", list(t->eos_ids()).c_str(),
              str(t->pretokenizer()).c_str());
}

void printInspectJson(const PlanFile& file) {
  const plan::Plan& p = file.plan();
  const plan::ModelInfo& m = *p.model();
  const plan::MemoryPlan& mem = *p.memory();
  const PlanSummary s = summarize(p);
  std::ostringstream j;
  j << "{\n";
  j << "  \"path\": " << json::quoted(file.path()) << ",\n";
  j << "  \"file_bytes\": " << file.fileSize() << ",\n";
  j << "  \"format_version\": " << p.format_version() << ",\n";
  j << "  \"compiler\": " << json::quoted(str(p.compiler())) << ",\n";
  j << "  \"target\": " << json::quoted(str(p.target())) << ",\n";
  j << "  \"model\": {\"family\": " << json::quoted(str(m.family()))
    << ", \"source\": " << json::quoted(str(m.source())) << ", \"vocab_size\": " << m.vocab_size()
    << ", \"hidden_size\": " << m.hidden_size() << ", \"layers\": " << m.layers()
    << ", \"heads\": " << m.heads() << ", \"kv_heads\": " << m.kv_heads()
    << ", \"head_dim\": " << m.head_dim() << ", \"intermediate_size\": " << m.intermediate_size()
    << ", \"parameters\": " << m.parameters() << "},\n";
  j << "  \"context\": " << p.context() << ",\n";
  j << "  \"max_step_tokens\": " << p.max_step_tokens() << ",\n";
  j << "  \"max_batch\": " << p.max_batch() << ",\n";
  j << "  \"dummy_weights\": " << (p.dummy_weights() ? "true" : "false") << ",\n";
  j << "  \"memory_mib\": {\"weights\": " << mib(mem.weight_bytes())
    << ", \"activations\": " << mib(mem.activation_bytes()) << ", \"kv\": " << mib(mem.kv_bytes())
    << ", \"workspace\": " << mib(mem.workspace_bytes()) << "},\n";
  j << "  \"buffers\": {\"total\": " << p.buffers()->size();
  for (const auto& [kind, count] : s.buffersByKind)
    j << ", " << json::quoted(kind) << ": " << count;
  j << "},\n";
  j << "  \"ops\": [";
  for (uint32_t i = 0; i < p.ops()->size(); ++i) {
    const plan::Op* op = p.ops()->Get(i);
    j << (i ? ",\n" : "\n") << "    {\"index\": " << i
      << ", \"kind\": " << json::quoted(opKind(op->attrs_type()))
      << ", \"name\": " << json::quoted(str(op->name())) << ", \"inputs\": " << list(op->inputs())
      << ", \"outputs\": " << list(op->outputs()) << "}";
  }
  j << "\n  ],\n";
  j << "  \"kernels\": {\"functions\": " << s.functionCount << ", \"cubin_archs\": [";
  for (size_t i = 0; i < s.cubinArchs.size(); ++i)
    j << (i ? ", " : "") << json::quoted(s.cubinArchs[i]);
  j << "], \"ptx\": " << (s.hasPtx ? "true" : "false")
    << ", \"ptx_arch\": " << json::quoted(s.ptxArch) << ", \"source_bytes\": " << s.sourceBytes
    << "},\n";
  const plan::Tokenizer* t = p.tokenizer();
  if (t) {
    j << "  \"tokenizer\": {\"kind\": " << json::quoted(plan::EnumNameTokenizerKind(t->kind()))
      << ", \"vocab\": " << (t->tokens() ? t->tokens()->size() : 0)
      << ", \"bos_id\": " << t->bos_id() << ", \"add_bos\": " << (t->add_bos() ? "true" : "false")
      << ", \"eos_ids\": " << list(t->eos_ids())
      << ", \"pretokenizer\": " << json::quoted(str(t->pretokenizer())) << "}\n";
  } else {
    j << "  \"tokenizer\": null\n";
  }
  j << "}\n";
  std::fputs(j.str().c_str(), stdout);
}

} // namespace

int runInspect(int argc, char** argv) {
  std::string path;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kInspectHelp, stdout);
      return 0;
    }
    if (arg == "--json")
      json = true;
    else if (!arg.empty() && arg[0] == '-')
      usage("unknown option '" + arg + "' for inspect");
    else if (path.empty())
      path = arg;
    else
      usage("unexpected argument '" + arg + "'");
  }
  if (path.empty())
    usage("inspect needs a plan: ninfer inspect PLAN [--json]");
  std::unique_ptr<PlanFile> file = take(PlanFile::open(path));
  if (json)
    printInspectJson(*file);
  else
    printInspectText(*file);
  return 0;
}

} // namespace cli
} // namespace ninfer
