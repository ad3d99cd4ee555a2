"""generated/: where it lives, and the files in it that codegen writes and tools and the runtime read.

- ``manifest.json``: every variant's axes, parameters and, per arch, its resources and the sha256 of its machine
  code (its .text section: kernel_texts), and every module's cubins with their hashes. It holds only what the sources
  (and the compiler's version) determine, so a build with no source change leaves it byte for byte as it was.
  Per-run facts (compile times) go to ``cubins/build-log.json`` beside the cubins, which git ignores.
- ``tuning/<target>.json``: what `cukiln tune` measured on a GPU (``<arch>-<gpu>``, core.archs.tuning_target; an arch's
  file serves every GPU of it without its own), per tuned rule, stamped with
  a fingerprint of the machine code of the kernels it timed (each one's text_sha256 in the manifest).
- ``cubins/<arch>/<module>.cubin``: the compiled modules (not checked in).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path

MANIFEST = "manifest.json"
DISPATCH = "dispatch.py"
TUNING = "tuning"
CUBINS = "cubins"
BUILD_LOG = f"{CUBINS}/build-log.json"
MANIFEST_SCHEMA = 3  # 3: each variant's text_sha256 per arch


def generated_dir() -> Path:
    """generated/ of this installation (an editable install maps it to the repository's folder)."""
    import cukiln.generated

    return Path(cukiln.generated.__file__).resolve().parent


def cubin_relpath(arch: str, module: str) -> str:
    return f"{CUBINS}/{arch}/{module}.cubin"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def write_text_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless ``path`` already holds it (so unchanged files keep their times); True if written."""
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def read_manifest(root: Path | None = None) -> dict:
    return read_json((root or generated_dir()) / MANIFEST)


def write_manifest(manifest: dict, root: Path | None = None) -> bool:
    return write_text_if_changed((root or generated_dir()) / MANIFEST, json.dumps(manifest, indent=1) + "\n")


def read_build_log(root: Path | None = None) -> dict:
    """The last build's per-run facts: {"compile_seconds": {arch: {module: seconds}}} (empty when none)."""
    return read_json((root or generated_dir()) / BUILD_LOG)


def write_build_log(log: dict, root: Path | None = None) -> None:
    path = (root or generated_dir()) / BUILD_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(log, indent=1) + "\n")


def read_tuning(root: Path | None = None) -> dict[str, dict]:
    """tuning target (an arch, or an arch and a device: core.archs.tuning_target) -> tuning data, from
    generated/tuning/<target>.json."""
    folder = (root or generated_dir()) / TUNING
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def kernel_texts(cubin: bytes) -> dict[str, bytes]:
    """Each kernel's machine code in a cubin: its symbol -> the bytes of its .text section, in file order."""
    if cubin[:5] != b"\x7fELF\x02":
        raise ValueError("not a 64-bit ELF cubin")
    (table,) = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, table + i * entry_size) for i in range(count)]
    names_at = headers[names_index][4]
    texts = {}
    for name_offset, _, _, _, offset, size in headers:
        name = cubin[names_at + name_offset:cubin.index(b"\0", names_at + name_offset)]
        if name.startswith(b".text."):
            texts[name[len(b".text."):].decode()] = cubin[offset:offset + size]
    return texts


def tuning_fingerprint(manifest: dict, kernels: str, arch: str, settings: dict | None = None) -> str:
    """A short hash of the machine code for ``arch`` (each variant's text_sha256 in the manifest) of the kernels whose
    names match the regex ``kernels``: those a tuned rule was measured on, and of the launch ``settings`` it was
    measured under (none: the code alone). A change that leaves their instructions and the settings as they were
    leaves it as it was, whatever it does to the other kernels of their modules."""
    pattern = re.compile(kernels)
    h = hashlib.sha256()
    if settings:
        h.update(json.dumps(settings, sort_keys=True).encode() + b"\n")
    for entry in sorted(manifest.get("variants", []), key=lambda e: e["name"]):
        if pattern.match(entry["name"]):
            text = ((entry.get("resources") or {}).get(arch) or {}).get("text_sha256", "")
            h.update(f"{entry['name']}:{text}\n".encode())
    return h.hexdigest()[:16]


def write_tuning(target: str, rule: str, result: dict, kernels: str, root: Path | None = None,
                 settings: dict | None = None) -> Path:
    """Store ``result`` as the entry ``rule`` of generated/tuning/<target>.json (a tuning target: an arch, or an arch
    and a device, core.archs.tuning_target), stamped with the fingerprint of the kernels (a regex of variant names) it
    timed, for the target's arch, and of the launch ``settings`` it ran under. Returns the path."""
    from .archs import target_arch

    root = root or generated_dir()
    path = root / TUNING / f"{target}.json"
    data = read_json(path)
    data[rule] = {**result, "fingerprint": tuning_fingerprint(read_manifest(root), kernels, target_arch(target), settings)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
