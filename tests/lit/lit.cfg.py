# lit configuration for the ninfer IR and pass tests. Tool paths come in as
# --param values from tests/lit/CMakeLists.txt, so the suite runs against the
# build that ctest belongs to; outputs go to the build tree (exec_root).
import os

import lit.formats

config.name = "ninfer"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = lit_config.params.get("exec_root", config.test_source_root)
config.excludes = ["CMakeLists.txt", "lit.cfg.py"]

ninfer_opt = lit_config.params.get("ninfer_opt")
llvm_tools = lit_config.params.get("llvm_tools_dir", "/usr/lib/llvm-19/bin")
if not ninfer_opt or not os.path.exists(ninfer_opt):
    lit_config.fatal("pass --param ninfer_opt=<path to ninfer-opt> (got %r)" % ninfer_opt)

# Longest names first so "not" never rewrites part of another substitution.
config.substitutions.append(("ninfer-opt", ninfer_opt))
config.substitutions.append(("FileCheck", os.path.join(llvm_tools, "FileCheck")))
config.substitutions.append(("not ", os.path.join(llvm_tools, "not") + " "))
