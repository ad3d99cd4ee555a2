"""The native hot path (hot_path.cpp): the torch ops' per-call work in C++, built once per torch version.

Through the dispatcher (eager op calls, torch.compile'd graphs, CUDA-graph captures) a Python kernel costs its
boxing into Python and its Python frames on every call; `cukiln bench overhead` measures both. With the native hot
path each cukiln torch op gets two C++ kernels (hot_path.cpp says what each does): a gate at the Autograd key and a
plan cache at the CUDA key. The op's Python kernel still decides everything: on a plan-cache miss the C++ kernel
calls it, and it validates, plans, launches and returns a *description* of its plan (``describe`` below), which the
C++ side replays on every later call with the same metadata. A call its description cannot serve (lengths out of
range, written tensors overlapping the ones read) goes back to the Python kernel, which raises the error.

Found first in a wheel (cukiln/native/, built with it for the torch then installed), then in the user cache, each
imported as it is (no compiler, no ninja); else compiled by torch.utils.cpp_extension into the user cache (about a
minute, announced; `cukiln build` with a GPU and `cukiln native` do it ahead), once per torch version, Python and
source. ``CUKILN_NATIVE=0`` turns it off; so does a failed build (said once on stderr): the ops then run their Python
kernels, with the same results.
``CUKILN_NATIVE_TIMERS=1`` builds it (apart) with timers on each stage of a hit (STAGES; a study's tool, not for use).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import struct
import sys
from pathlib import Path

from .overrides import on_change

SOURCE = Path(__file__).with_name("hot_path.cpp")
PACKAGED = Path(__file__).with_name("native")  # a wheel's builds (setup.py), one folder per build_name()
NAME = "cukiln_hot_path"

# Where a pointer field's value comes from (hot_path.cpp's Source).
ARGUMENT, OUTPUT, SCRATCH = 0, 1, 2
NOTHING = None  # a variant's return that its caller did not ask for (hot_path.cpp's kNothing)
UINT8 = 0  # torch's ScalarType number of uint8 (a scratch workspace of bytes)

_module = None
_tried = False
_off = ""  # why the extension is off, once module() has tried


def module():
    """The loaded extension, or None (turned off, or no build possible here: off_reason() says which)."""
    global _module, _tried, _off
    if not _tried:
        _tried = True
        if os.environ.get("CUKILN_NATIVE", "1") == "0":
            _off = "turned off by CUKILN_NATIVE=0"
        else:
            _module = _build()
            if _module is not None:
                on_change(_module.clear)  # a forced dispatch choice changes what the plans would be
    return _module


def off_reason() -> str:
    """Why module() gave None (empty while it has not tried, or where the extension loaded)."""
    return _off


# The stages of a public call's plan-cache hit that a timers build (CUKILN_NATIVE_TIMERS=1) times, in order
# (hot_path.cpp's STAGE): the arguments converted, the key built, the plan looked up, the checks, the allocations,
# the driver and stream found, the launches, the versions bumped and returns pushed, the returns made Python objects.
STAGES = ("arguments", "key", "lookup", "checks", "allocate", "stream", "launch", "finish", "to Python")


def _timers() -> bool:
    return os.environ.get("CUKILN_NATIVE_TIMERS", "0") == "1"


def build_name(torch) -> str:
    """The build's folder name: the torch version, Python and source it is compiled for (an extension serves that
    torch alone)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    version = re.sub(r"[^0-9A-Za-z.]", "_", torch.__version__)
    timers = "-stage-timers" if _timers() else ""
    return f"torch-{version}-py{sys.version_info[0]}{sys.version_info[1]}-{digest}{timers}"


def _build_directory(torch) -> Path:
    root = Path(os.environ.get("CUKILN_CACHE_DIR") or Path.home() / ".cache" / "cukiln")
    return root / "native" / build_name(torch)


def _import_built(directory: Path):
    """The extension a build left in ``directory``, imported as it is; None where there is none, or where it was
    built against other libraries than those installed now (compiled again then)."""
    found = next(iter(sorted(directory.glob(f"{NAME}*.so"))), None)
    if found is None:
        return None
    spec = importlib.util.spec_from_file_location(NAME, found)
    loaded = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(loaded)
    except ImportError:
        return None
    return loaded


def _build():
    global _off
    import torch

    directory = _build_directory(torch)
    for where in (PACKAGED / build_name(torch), directory):
        loaded = _import_built(where)
        if loaded is not None:
            return loaded
    from torch.utils import cpp_extension

    print(f"cukiln: compiling the native hot path for torch {torch.__version__} (once; about a minute; "
          "`cukiln native` does it ahead)", file=sys.stderr)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        flags = ["-O2"] + (["-DCUKILN_HOT_PATH_TIMERS"] if _timers() else [])
        return cpp_extension.load(NAME, [str(SOURCE)], extra_cflags=flags, build_directory=str(directory),
                                  verbose=False)
    except Exception as error:  # no compiler, no ninja, headers missing: the Python kernels serve every call
        _off = f"its build failed ({type(error).__name__}: {str(error).splitlines()[0][:200]})"
        print(f"cukiln: the native hot path is off: {_off}; the torch ops run their Python kernels", file=sys.stderr)
        return None


def register(name: str, miss, autograd, per_call: tuple[bool, ...], grad_refused: tuple[bool, ...]) -> int | None:
    """C++ kernels for op cukiln::``name`` when the extension loads: the op's handle, or None (the caller registers
    its Python autograd kernel). ``miss(*arguments) -> (result, description)`` runs a call in Python: a
    description (describe()), None (the Python kernel serves every call of this key) or False (keep nothing);
    ``autograd(*arguments)`` serves calls that need autograd; ``per_call`` marks the int arguments a plan refills
    (left out of the plan-cache key); ``grad_refused`` the tensors that, requiring grad with grad mode on, make a
    caller() hand the call back (NotImplemented)."""
    native = module()
    if native is None:
        return None
    return native.register_op(name, miss, autograd, list(per_call), list(grad_refused))


def register_specialized(handle: int, name: str, given: list[int], values: list) -> None:
    """C++ kernels for op cukiln::``name`` (defined), a specialization of op ``handle`` taking the op's arguments
    ``given`` (their indices) and holding ``values`` for the rest (runtime/specialize.py)."""
    module().register_specialized(handle, name, given, values)


def caller(handle: int):
    """``call(*arguments)``: the op (or variant) of ``handle`` on its arguments, straight into its plan cache, for
    the public functions. A builtin function: a float argument also takes an int and a bool one any truth value, as
    the public functions' own conversions would. It returns NotImplemented, having done nothing, where grad mode is
    on and a tensor of the op's ``grad_refused`` (or an output given) requires grad: its caller's Python path
    refuses the call, or takes it to autograd."""
    return module().caller(handle)


def register_variant(handle: int, suffix: str, miss, outputs: int = 0) -> int:
    """A variant of op ``handle`` (its handle, for caller()): plans of its own, made by ``miss(*arguments,
    *outputs) -> (result, description)``. For public calls that give ``outputs`` output tensors, appended to the
    op's arguments (out=), whose argument indices past the op's name them; and for calls that do not ask for all of
    the op's results (decode's lse): a variant's description may return None in their place (``NOTHING``)."""
    return module().register_variant(handle, suffix, miss, outputs)


NO_LSE = "#no_lse"  # the suffix of an attention op's variant that allocates no lse (NATIVE_HANDLES keeps its handle)


def field_offsets(fmt: str) -> list[int]:
    """Byte offset of each field of a struct format of codegen/abi.struct_format (trailing padding not a field)."""
    offsets, at = [], 0
    for count, code in re.findall(r"(\d*)([a-zA-Z])", fmt):
        if code == "x":
            at += int(count or 1)
            continue
        offsets.append(at)
        at += struct.calcsize("<" + count + code)
    return offsets


def launch_description(bound, template, pointer_slots, integer_slots=(), maps=None) -> dict:
    """One kernel launch of a description: ``bound`` (launch.Kernel), ``template`` the parameter values with every
    refilled field at its base value, ``pointer_slots`` (field index, source, index, bytes added), ``integer_slots``
    (field index, argument index), ``maps`` None or (field indices, argument indices, encode)."""
    offsets = field_offsets(bound.packer.format)
    return {"symbol": bound.symbol, "function": int(bound.function), "context": int(bound.context),
            "grid": tuple(bound.grid), "block": tuple(bound.block), "shared": bound.shared, "cluster": bound.cluster,
            "programmatic": bound.overlap_previous, "params": bound.packer.pack(*template),
            "pointers": [(offsets[f], source, index, add) for f, source, index, add in pointer_slots],
            "integers": [(offsets[f], argument) for f, argument in integer_slots],
            "maps": None if maps is None else ([offsets[f] for f in maps[0]], list(maps[1]), maps[2])}


def scalar_type(dtype) -> int:
    import torch

    return {torch.uint8: UINT8, torch.float32: 6, torch.float16: 5, torch.bfloat16: 15, torch.int32: 3,
            torch.int64: 4, torch.float8_e4m3fn: 24}[dtype]


def describe(device: int, launches: list, *, outputs=(), scratch=(), returns=(), overlaps=(), bounds=(), ordered=(),
             bumps=()) -> dict:
    """A plan for hot_path.cpp: ``launches`` (launch_description), tensors allocated per call (``outputs``,
    ``scratch``: allocation tuples; the scratch tensors share one allocation), each returned value (an output's
    index, -1 - i for argument i: a caller's output given to a variant, or NOTHING: a variant's result not asked
    for), ``overlaps`` (written argument, checked argument, their byte spans' lo and hi relative to each pointer, and
    the Interleaving window (modulus, lo, hi) within which spans that meet share no byte, or (0, 0, 0)), int
    ``bounds`` (argument, lo, hi), ``ordered`` pairs (a, b) of int arguments with a <= b, argument tensors written
    (``bumps``: versions bumped)."""
    return {"device": device, "launches": launches, "outputs": list(outputs), "scratch": list(scratch),
            "returns": list(returns), "overlaps": list(overlaps), "bounds": list(bounds), "ordered": list(ordered),
            "bumps": list(bumps)}
