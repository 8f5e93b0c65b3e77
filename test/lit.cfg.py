# -*- Python -*-

import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "KPOOL"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kpool_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs", "lit.local.cfg"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%kpool_src_root", config.kpool_src_root))
config.substitutions.append(("%kpool_obj_root", config.kpool_obj_root))
config.substitutions.append(("%mlir_lib_dir", config.mlir_lib_dir))

# libdevice and ptxas are found through the CUDA environment variables, which
# lit otherwise strips.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kpool_tools_dir, append_path=True)

tool_dirs = [config.kpool_tools_dir, config.llvm_tools_dir]
tools = [
    "kpool-opt",
    "mlir-runner",
    ToolSubst("%mlir_runner_utils",
              os.path.join(config.mlir_lib_dir, "libmlir_runner_utils.so")),
    ToolSubst("%mlir_c_runner_utils",
              os.path.join(config.mlir_lib_dir, "libmlir_c_runner_utils.so")),
    ToolSubst("%libomp", os.path.join(config.llvm_lib_dir, "libomp.so")),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# ptxas assembles the PTX the GPU pipeline produces: the main check of the
# generated GPU code on machines without a GPU.
cuda_root = config.cuda_toolkit_root or os.environ.get("CUDA_HOME", "/usr/local/cuda")
ptxas = shutil.which("ptxas") or os.path.join(cuda_root, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
