"""Build the slim FlashInfer payload for a peer benchmark (run here, on a machine without a GPU).

    python3 benchmarks/peers/slim_flashinfer.py WHEEL_DIR DEST

(The house's script with flashinfer.prefill and the batch prefill JIT sources added, which FlashInfer's tensor-core
decode compiles: `bash benchmarks/peers/prepare.sh` makes .peers/ with it.)

WHEEL_DIR holds flashinfer_python-0.7.2.post1-py3-none-any.whl (62 MB: too big to carry whole) and
apache_tvm_ffi-*.whl (the include dirs its JIT uses). DEST/flashinfer gets:
  * the Python modules that `flashinfer.decode`, `flashinfer.rope` and `flashinfer.page` import at module
    level, found by walking their import statements (a superset of what a real import loads), plus the few
    imported lazily on the decode / rope call paths (jit.attention.variants, fi_trace, jit.api_log_stats);
  * data/csrc + data/include: the include closure of the sources that the decode (batch and single) and rope
    JIT modules compile, resolved over the include dirs FlashInfer hands nvcc;
  * data/cccl.tgz: FlashInfer's vendored CCCL (cub, libcudacxx, thrust; 26 MB of headers, 2 MB packed), whole:
    nvcc gets it ahead of the toolkit's CCCL, so a subset would mix the two versions (the toolkit's
    cooperative_groups.h pulls in <cuda/atomic>); setup.sh unpacks it on the GPU machine;
  * data/cutlass.tgz: the CUTLASS headers of that closure (the tensor-core decode's), packed the same way;
  * a stub flashinfer/__init__.py: the wheel's imports every kernel family (MoE, GEMM, MLA, comm, CuTe
    DSL, cuDNN ...) and their optional dependencies; the stub sets the version only, so import the
    submodules (flashinfer.decode, flashinfer.rope) directly.
"""
import ast
import os
import re
import shutil
import sys
import zipfile

ENTRIES = ["flashinfer.decode", "flashinfer.prefill", "flashinfer.rope", "flashinfer.page",
           "flashinfer.jit.attention.variants",
           "flashinfer.jit.attention.modules", "flashinfer.jit.rope", "flashinfer.fi_trace",
           "flashinfer.jit.api_log_stats", "flashinfer.version", "flashinfer._build_meta", "flashinfer.jit.page",
           "flashinfer.cake_fused_qk_rope_append", "flashinfer.jit.cake_fused_qk_rope_append"]
JIT_SOURCES = ["rope.cu", "flashinfer_rope_binding.cu", "batch_decode.cu", "batch_decode_jit_binding.cu",
               "single_decode.cu", "single_decode_jit_binding.cu", "batch_decode_customize_config.jinja",
               "batch_decode_kernel_inst.jinja", "single_decode_customize_config.jinja",
               "single_decode_kernel_inst.jinja", "page.cu", "flashinfer_page_binding.cu",
               # the tensor-core decode (use_tensor_cores=True) runs the batch prefill kernels: FA2's and sm_90's
               "batch_prefill.cu", "batch_prefill_jit_binding.cu", "batch_prefill_customize_config.jinja",
               # ... built with the paged-only host sources where it is planned over pages alone (`cukiln bench
               # decode --paged`)
               "batch_prefill_paged.cu", "batch_prefill_paged_jit_binding.cu",
               "batch_prefill_paged_kernel_inst.jinja", "batch_prefill_ragged_kernel_inst.jinja",
               "batch_prefill_sm90.cu", "batch_prefill_sm90_jit_binding.cu", "batch_prefill_sm90_customize_config.jinja",
               "batch_prefill_paged_sm90_kernel_inst.jinja", "batch_prefill_ragged_sm90_kernel_inst.jinja",
               "batch_prefill_fp8_sm90.cu", "batch_prefill_fp8_paged_sm90_kernel_inst.jinja",
               "batch_prefill_fp8_ragged_sm90_kernel_inst.jinja"]
# Headers that the Python side writes into the generated config (variant_decl in jit/attention/modules.py).
JIT_GENERATED_INCLUDES = ["flashinfer/attention/variants.cuh"]
STUB_INIT = '''"""Slim FlashInfer 0.7.2.post1 for the cukiln peer benchmark (made by slim_flashinfer.py): the
wheel's modules that flashinfer.decode / flashinfer.rope / flashinfer.page import, and the CUDA sources their
JIT modules compile. This stub replaces the wheel's __init__, which imports every kernel family and its
optional dependencies: import the submodules directly."""
from .version import __version__ as __version__
from .version import __git_commit__ as __git_commit__
'''


def module_file(root, mod):
    p = os.path.join(root, *mod.split("."))
    if os.path.isfile(os.path.join(p, "__init__.py")):
        return os.path.join(p, "__init__.py"), True
    if os.path.isfile(p + ".py"):
        return p + ".py", False
    return None, False


def module_level_imports(root, mod):
    """flashinfer modules imported by ``mod`` outside function bodies (try/if blocks included)."""
    path, is_pkg = module_file(root, mod)
    pkg = mod if is_pkg else mod.rsplit(".", 1)[0]
    found = []

    def visit(node):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(ch, ast.Import):
                found.extend(a.name for a in ch.names)
            elif isinstance(ch, ast.ImportFrom):
                if ch.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - (ch.level - 1)])
                    base = base + ("." + ch.module if ch.module else "")
                else:
                    base = ch.module
                found.append(base)
                found.extend(base + "." + a.name for a in ch.names)
            visit(ch)

    visit(ast.parse(open(path).read()))
    return found


def python_closure(root):
    seen, stack = set(), list(ENTRIES)
    while stack:
        m = stack.pop()
        if m in seen or not m or not m.startswith("flashinfer"):
            continue
        if module_file(root, m)[0] is None:
            continue
        seen.add(m)
        parts = m.split(".")
        stack.extend(".".join(parts[:i]) for i in range(2, len(parts)))  # parent packages, not the root
        if m != "flashinfer":
            stack.extend(module_level_imports(root, m))
    return sorted(module_file(root, m)[0] for m in seen)


def include_closure(data, tvm_inc, roots=None):
    dirs = [f"{data}/cccl/cub", f"{data}/cccl/libcudacxx/include", f"{data}/cccl/thrust", tvm_inc,
            f"{tvm_inc}/dlpack", f"{data}/include", f"{data}/csrc", f"{data}/cutlass/include",
            f"{data}/cutlass/tools/util/include", f"{data}/spdlog/include"]
    rx = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
    if roots is None:
        roots = [f"{data}/csrc/{n}" for n in JIT_SOURCES] + [f"{data}/include/{n}" for n in JIT_GENERATED_INCLUDES]
    seen, stack = set(), list(roots)
    while stack:
        f = os.path.normpath(stack.pop())
        if f in seen:
            continue
        seen.add(f)
        for inc in rx.findall(open(f, errors="replace").read()):
            for d in [os.path.dirname(f)] + dirs:
                c = os.path.join(d, inc)
                if os.path.isfile(c):
                    stack.append(c)
                    break  # not found: a CUDA toolkit or system header
    return sorted(f for f in seen if f.startswith(data) and not f.startswith(f"{data}/cccl/"))


def main(wheel_dir, dest):
    tmp = os.path.join(dest, "_unpacked")
    shutil.rmtree(tmp, ignore_errors=True)
    fi_whl = next(os.path.join(wheel_dir, n) for n in os.listdir(wheel_dir) if n.startswith("flashinfer_python-"))
    tvm_whl = next(os.path.join(wheel_dir, n) for n in os.listdir(wheel_dir) if n.startswith("apache_tvm_ffi-"))
    zipfile.ZipFile(fi_whl).extractall(tmp)
    zipfile.ZipFile(tvm_whl).extractall(os.path.join(tmp, "_tvm"))
    out = os.path.join(dest, "flashinfer")
    shutil.rmtree(out, ignore_errors=True)
    files = python_closure(tmp)
    files += include_closure(os.path.join(tmp, "flashinfer", "data"), os.path.join(tmp, "_tvm", "tvm_ffi", "include"))
    # FlashInfer's one-launch QK RMSNorm + RoPE + paged KV append: its manifest and the sm_90a builds (JIT sources)
    cake = os.path.join(tmp, "flashinfer", "data", "csrc", "cake_fused_qk_rope_append")
    if os.path.isdir(cake):
        for r, _, fs in os.walk(cake):
            if r == cake or "sm_90" in os.path.relpath(r, cake):
                files += [os.path.join(r, f) for f in fs]
        data = os.path.join(tmp, "flashinfer", "data")
        files += [f for f in include_closure(data, os.path.join(tmp, "_tvm", "tvm_ffi", "include"),
                                             [f for f in files if f.startswith(cake) and f.endswith(".cu")])
                  if f not in files]
    for f in files:
        d = os.path.join(dest, os.path.relpath(f, tmp))
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(f, d)
    import tarfile

    with tarfile.open(os.path.join(out, "data", "cccl.tgz"), "w:gz") as tar:
        for sub in ("cub", "libcudacxx", "thrust"):
            tar.add(os.path.join(tmp, "flashinfer", "data", "cccl", sub), arcname=f"cccl/{sub}")
    # the CUTLASS headers of the tensor-core decode's closure (23 MB as files): packed too, so that the payload leaves
    # room in a carry for the cubins beside it
    cutlass = os.path.join(out, "data", "cutlass")
    if os.path.isdir(cutlass):
        with tarfile.open(cutlass + ".tgz", "w:gz") as tar:
            tar.add(cutlass, arcname="cutlass")
        shutil.rmtree(cutlass)
    with open(os.path.join(out, "__init__.py"), "w") as fh:
        fh.write(STUB_INIT)
    info = [n for n in os.listdir(tmp) if n.endswith(".dist-info")][0]
    os.makedirs(os.path.join(dest, info), exist_ok=True)
    for n in ("METADATA", "WHEEL", "top_level.txt", "entry_points.txt"):
        if os.path.exists(os.path.join(tmp, info, n)):
            shutil.copy2(os.path.join(tmp, info, n), os.path.join(dest, info, n))
    shutil.rmtree(tmp)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
    print(f"{len(files)} files, {size / 1e6:.1f} MB in {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
