"""Content-addressed compile cache: (source, headers, options, arch, NVRTC version) -> cubin + log.

Lives under the user cache dir (``$CUKILN_CACHE_DIR``, else ``$XDG_CACHE_HOME/cukiln``, else
``~/.cache/cukiln``). Entries are written to a temporary file and renamed into place, so concurrent
builders never see a partial entry; an entry whose cubin no longer matches its recorded hash is
treated as missing and rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("CUKILN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cukiln"


def cache_key(source: str, headers: dict[str, str], options: tuple[str, ...], arch: str, nvrtc: str) -> str:
    h = hashlib.sha256()
    for part in (source, *sorted(headers.items()), *options, arch, nvrtc):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class CachedCubin:
    cubin: bytes
    log: str
    compile_seconds: float


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(key: str, root: Path | None = None) -> CachedCubin | None:
    root = root or cache_dir()
    meta_path, cubin_path = root / f"{key}.json", root / f"{key}.cubin"
    try:
        meta = json.loads(meta_path.read_text())
        cubin = cubin_path.read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(cubin).hexdigest() != meta.get("sha256"):
        return None  # truncated or corrupted: rebuild
    return CachedCubin(cubin, meta["log"], meta["compile_seconds"])


@contextlib.contextmanager
def entry_lock(key: str, root: Path | None = None):
    """Holds an exclusive lock on one entry: two processes about to compile the same module take turns,
    so the second finds the first one's cubin instead of compiling it again. (Without the lock they would
    still both end with a valid entry: writes are atomic renames.)"""
    root = root or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def store(key: str, entry: CachedCubin, root: Path | None = None) -> None:
    root = root or cache_dir()
    # The cubin first: a reader that finds the metadata also finds a complete cubin to verify.
    _atomic_write(root / f"{key}.cubin", entry.cubin)
    meta = {"sha256": hashlib.sha256(entry.cubin).hexdigest(), "log": entry.log,
            "compile_seconds": entry.compile_seconds}
    _atomic_write(root / f"{key}.json", json.dumps(meta).encode())
