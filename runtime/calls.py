"""One op's calls, whatever their path: its plans (one plan cache), their replay, its torch ops and native variants.

Every op is an ``OpRuntime``: its schema (runtime/schema.py) and its planner, ``plan(call) -> Plan``, which validates
a ``Call`` (the op's arguments, as the torch op orders them, and the call's form: in place, outputs given, results
wanted) and describes its launches. A ``Plan`` is the one description of how to run every later call of the same
metadata: each launch's bound kernel and parameter values with the refilled fields at their base values, where each
pointer comes from (an argument, an output allocated per call, a scratch allocation), the int fields refilled from
arguments, the tensor maps encoded per pointer pair, the outputs to allocate, the checks a call must pass (lengths in
range, written tensors apart from the ones read), the tensors written and the values returned.

Two executors replay a plan: the native hot path (hot_path.cpp, which keeps the plan's ``description()`` under the
call's key) and ``Plan.run`` here, in Python, for the calls the native path does not take (it is off, or the plan
depends on values: host lengths, host cu_seqlens). A call whose checks fail is planned afresh, which raises the
error that explains it. The plan-cache key is the op's arguments' metadata (each tensor's shape, strides, dtype,
device and pointer alignment, each other value itself, less the int lengths a plan refills), built from the schema
as the native side builds its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .launch import kernel
from .loader import KERNELS
from .native import ARGUMENT, OUTPUT, SCRATCH  # where a pointer comes from (hot_path.cpp's Source)
from .overrides import on_change
from .plan_cache import PlanCache
from .schema import NUMBER_OR_TENSOR, Form, OpSchema
from .tensors import ITEMSIZE, TensorInfo, from_torch, interleaving

_MAX_TENSOR_MAPS = 64  # the pointer pairs whose tensor maps a launch keeps
_torch = None


def _import_torch():
    global _torch
    import torch

    _torch = torch
    return torch


@dataclass
class Launch:
    """One kernel launch of a plan: ``kernel`` the bound launch.Kernel, ``template`` its parameter values with each
    refilled field at its base value, ``pointers`` (field index, source, index, bytes added), ``integers`` (field
    index, argument index), ``maps`` None or (field indices, argument indices, encode(pointers) -> [bytes])."""

    kernel: object
    template: list
    pointers: list
    integers: list = field(default_factory=list)
    maps: tuple | None = None
    # pointers -> their tensor maps: a decode loop reads the same caches call after call (bounded)
    encoded: dict = field(default_factory=dict)

    def values(self, args, outputs, scratch) -> list:
        values = list(self.template)
        for f, source, index, add in self.pointers:
            if source == ARGUMENT:
                t = args[index]
                values[f] = t.data_ptr() + add
            elif source == OUTPUT:
                values[f] = outputs[index].data_ptr() + add
            else:
                values[f] = scratch[index] + add
        for f, a in self.integers:
            values[f] = args[a]
        if self.maps is not None:
            offsets, arguments, encode = self.maps
            pointers = tuple(args[a].data_ptr() for a in arguments)
            maps = self.encoded.get(pointers)
            if maps is None:
                if len(self.encoded) >= _MAX_TENSOR_MAPS:
                    self.encoded.clear()
                maps = self.encoded[pointers] = tuple(encode(pointers))
            for f, m in zip(offsets, maps):
                values[f] = m
        return values


@dataclass
class Plan:
    """How to run every call of one key (see the module docstring); ``cacheable`` False where it serves this call
    alone (its values were checked on the host: ``substitutes`` then holds the device copies of host tensors, by
    argument index, which the launches read in their place); ``after`` a Python step run after the launches (the
    decode step's lengths advanced), which no description carries."""

    device: int
    launches: list
    outputs: list = field(default_factory=list)  # (sizes, strides, torch dtype) allocated per call
    scratch: list = field(default_factory=list)  # (sizes, strides, torch dtype), one allocation
    returns: list = field(default_factory=list)  # per value: output i, -1 - i (argument i), or None
    overlaps: list = field(default_factory=list)  # (written, checked, w_lo, w_hi, c_lo, c_hi, Interleaving|None)
    bounds: list = field(default_factory=list)  # (argument, lo, hi)
    ordered: list = field(default_factory=list)  # (a, b): argument a <= argument b
    bumps: list = field(default_factory=list)  # argument tensors written (versions bumped)
    cacheable: bool = True
    substitutes: dict = field(default_factory=dict)
    after: object = None
    apart: tuple | None = None  # the pointers of the last call whose overlap checks passed
    # this call's peculiarity (an output given at its input's own address, taken as in place): nothing is kept
    peculiar: bool = False
    detail: object = None  # the planner's own product (a RopePlan, a DecodePlan, ...), for checks and measurements

    def __post_init__(self) -> None:
        self.involved = tuple(sorted({i for o in self.overlaps for i in o[:2]}))
        self.checked = bool(self.bounds or self.ordered or self.overlaps)  # checks a call must pass to reuse it
        self.scratch_offsets, total = [], 0
        for sizes, strides, dtype in self.scratch:
            self.scratch_offsets.append(total)
            n = 0 if 0 in sizes else 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
            total += -(-n * dtype.itemsize // 256) * 256
        self.scratch_bytes = total

    def overlapping(self, args) -> tuple[int, int] | None:
        """(written, checked) argument indices of the first pair whose tensors overlap at this call's addresses.
        The answer depends on the involved pointers alone: the last ones found apart are remembered."""
        if not self.overlaps:
            return None
        pointers = tuple(_pointer(args[i]) for i in self.involved)
        if pointers == self.apart:
            return None
        for w, c, w_lo, w_hi, c_lo, c_hi, window in self.overlaps:
            pw, pc = _pointer(args[w]), _pointer(args[c])
            if pw and pc and pw + w_lo < pc + c_hi and pc + c_lo < pw + w_hi and (window is None or
                                                                               not window.apart(pc - pw)):
                return w, c
        self.apart = pointers
        return None

    def passes(self, args) -> bool:
        """Whether a call of this key meets the checks a plan leaves to each call (hot_path.cpp's passes)."""
        for a, lo, hi in self.bounds:
            if not lo <= args[a] <= hi:
                return False
        for a, b in self.ordered:
            if args[a] > args[b]:
                return False
        return self.overlapping(args) is None

    def run(self, args):
        """Replay the plan on a call's arguments (a variant's given outputs after the op's): its returns. Runs on
        every call of the Python path: written for speed."""
        torch = _torch or _import_torch()
        if self.substitutes:
            args = list(args)
            for i, t in self.substitutes.items():
                args[i] = t
        outputs, workspace, scratch = (), None, ()
        if self.outputs or self.scratch_bytes:
            device = args[0].device  # the first tensor's (the native path allocates on the plan's device alike)
            outputs = [torch.empty_strided(sizes, strides, dtype=dtype, device=device)
                       for sizes, strides, dtype in self.outputs]
            if self.scratch_bytes:
                workspace = torch.empty(self.scratch_bytes, dtype=torch.uint8, device=device)
                base = workspace.data_ptr()
                scratch = [base + o for o in self.scratch_offsets]
        if self.launches:
            stream = torch._C._cuda_getCurrentRawStream(self.device)
            for launch in self.launches:
                launch.kernel(launch.values(args, outputs, scratch), stream)
        if self.bumps:
            torch._C._increment_version([args[i] for i in self.bumps])
        if self.after is not None:
            self.after(args, workspace, self.scratch_offsets)
        del workspace  # lives until every launch reading it is queued (the caching allocator orders reuse by stream)
        return [None if r is None else outputs[r] if r >= 0 else args[-1 - r] for r in self.returns]

    def description(self) -> dict | None:
        """The plan as hot_path.cpp replays it (runtime/native.py's describe); None where it cannot serve a later
        call (host values, a Python step after the launches)."""
        from . import native

        if not self.cacheable or self.after is not None:
            return None
        launches = [native.launch_description(l.kernel, l.template, l.pointers, l.integers, l.maps)
                    for l in self.launches]
        overlaps = [(w, c, w_lo, w_hi, c_lo, c_hi) + ((0, 0, 0) if window is None else
                                                     (window.modulus, window.lo, window.hi))
                    for w, c, w_lo, w_hi, c_lo, c_hi, window in self.overlaps]
        return native.describe(self.device, launches, outputs=[(s, st, native.scalar_type(d)) for s, st, d in
                                                               self.outputs],
                               scratch=[(s, st, native.scalar_type(d)) for s, st, d in self.scratch],
                               returns=self.returns, overlaps=overlaps, bounds=self.bounds, ordered=self.ordered,
                               bumps=self.bumps)


def _pointer(t) -> int:
    return t.data_ptr() if t is not None and type(t) is not int else 0


class Call:
    """One call as a planner sees it: the op's arguments by name (``call["q"]``; an int-or-tensor's value is the
    tensor given, else the int), their TensorInfos (``info``), the form (``inplace``, ``given``, ``wanted``), and
    what the plan is being built of: the outputs allocated, the device copies of host values, and where each tensor
    a launch reads lies (``source``)."""

    def __init__(self, op: "OpRuntime", args: tuple, form: Form, outputs: tuple, validating: bool = False) -> None:
        self.op, self.args, self.form = op, args, form
        # a float64 reference's call: validated as the kernels would validate it, on any device, nothing bound
        self.validating = validating
        self.schema = op.schema
        # the caller's outputs, by name, and their argument indices past the op's (a variant's extras)
        self.given = {}
        self.extra_index = {}
        for i, (name, t) in enumerate(zip(form.extras(), outputs)):
            self.given[name], self.extra_index[name] = t, len(args) + i
        self.full = args + tuple(outputs)  # what a plan's argument indices refer to
        self.allocated: dict[str, object] = {}  # output name -> (index, tensor)
        self.aliases: dict[str, str] = {}  # output name -> the argument it is (in place)
        self.scratch: list = []  # (sizes, strides, dtype)
        self.scratch_names: dict[str, tuple[int, int]] = {}  # name -> (scratch index, bytes added)
        self.substitutes: dict[int, object] = {}
        self.cacheable = True
        self._infos: dict = {}

    # --- the arguments ------------------------------------------------------------------------------------------

    def __getitem__(self, name: str):
        if name in self.given:
            return self.given[name]
        if name in self.allocated:
            return self.allocated[name][1]
        if name in self.aliases:
            return self[self.aliases[name]]
        arg = self.schema.arg(name)
        if arg.public_only:
            return self.form.flags.get(name, arg.default if arg.role == "flag" else None)
        i = self.op.index[name]
        if i in self.substitutes:
            return self.substitutes[i]
        if arg.type in NUMBER_OR_TENSOR and self.args[i] is None:
            return self.args[self.schema.int_index(name)]
        return self.args[i]

    def arguments(self) -> dict:
        """Every argument a planner takes, by name: each tensor's TensorInfo (an output's too: given, allocated, or
        the input it is), each int-or-tensor's TensorInfo or int, each other value as given, each flag."""
        out = {}
        for a in self.schema.args:
            if a.role in ("stream", "renamed") or a.type == "Rotary":
                continue
            if a.role == "flag":
                out[a.name] = bool(self[a.name])
            elif a.role == "out" and a.parts:
                out.update({p: self.info(p) for p in a.parts})
            elif a.type == "Tensor" or a.type in NUMBER_OR_TENSOR or a.role == "out":
                out[a.name] = self.info(a.name)
            else:
                out[a.name] = self[a.name]
        return out

    def tensor_names(self) -> list[str]:
        """The names of every tensor argument and output of the call (an output that is an input: the input's)."""
        names = []
        for a in self.schema.args:
            if a.role == "out":
                names += [p for p in (a.parts or (a.name,)) if p not in self.aliases]
            elif (a.type == "Tensor" or a.type in NUMBER_OR_TENSOR) and not a.public_only:
                names.append(a.name)
        return names

    def info(self, name: str):
        """The TensorInfo of tensor ``name`` (an argument, an output: given, allocated or the input it is), its dtype
        checked against the schema's; an int-or-tensor's int, or None, as itself."""
        if name in self._infos:
            return self._infos[name]
        value = self[name]
        if value is None or (type(value) in (int, float) and name in self.op.number_or_tensor):
            info = value
        elif self.validating:
            info = standing_for(value, name, self.op.dtypes.get(name))
        else:
            accepts = self.op.dtypes.get(name)
            info = from_torch(value, name, accepts) if accepts else from_torch(value, name)
        self._infos[name] = info
        return info

    # --- what the GPU is: its facts, and the kernels bound on it (none while a reference validates) ---------------

    def arch(self, device: int) -> str:
        return VALIDATION_ARCH if self.validating else KERNELS.arch(device)

    def tuning(self, device: int) -> str:
        """The tuning target whose tuned rules apply on ``device`` (its own, else its arch's: core.archs.tuned)."""
        return VALIDATION_ARCH if self.validating else KERNELS.tuning_target(device)

    def sms(self, device: int) -> int:
        return VALIDATION_SMS if self.validating else KERNELS.sm_count(device)

    def max_shared(self, device: int) -> int | None:
        return None if self.validating else KERNELS.max_shared_per_block(device)

    def occupancy(self, device: int, threads: int):
        """(resident(module, symbol, shared), active_clusters(module, symbol, threads, shared, cluster)) of the GPU
        (None, None while a reference validates: the planners' own assumptions)."""
        if self.validating:
            return None, None
        return (lambda module, symbol, shared: KERNELS.resident_blocks(device, module, symbol, threads, shared),
                lambda module, symbol, t, shared, cluster: KERNELS.active_clusters(device, module, symbol, t, shared,
                                                                                  cluster))

    def bind(self, device: int, module: str, symbol: str, fmt: str, grid, block, shared: int = 0,
             overlap_previous: bool = False, cluster: int = 1):
        """The bound launch.Kernel of a launch (None while a reference validates: nothing is loaded)."""
        if self.validating:
            return None
        return kernel(device, module, symbol, fmt, grid, block, shared, overlap_previous, cluster)

    def info_of(self, name: str, tensor, like: str | None = None) -> TensorInfo:
        """The TensorInfo of a tensor the plan stands in for one of its own (a workspace's), as ``name``; ``like``: the
        argument whose dtypes it takes (a float64 reference's stand-in then stands for the narrower dtype that
        argument's does)."""
        if not self.validating:
            return from_torch(tensor, name)
        return standing_for(tensor, name, self.op.dtypes.get(like) if like else None)

    def index_of(self, name: str) -> int:
        """The argument index of tensor ``name`` in the call (an op argument or a given output)."""
        if name in self.extra_index:
            return self.extra_index[name]
        if name in self.aliases:
            return self.index_of(self.aliases[name])
        return self.op.index[name]

    # --- what the plan is made of --------------------------------------------------------------------------------

    def allocate(self, name: str, tensor):
        """Output ``name`` allocated for this call (allocated afresh, alike, on every call of the key)."""
        self.allocated[name] = (len(self.allocated), tensor)
        return tensor

    def alias(self, name: str, argument: str):
        """Output ``name`` is argument ``argument`` itself (an in-place call)."""
        self.aliases[name] = argument
        self._infos.pop(name, None)
        return self[argument]

    def output(self, name: str, like):
        """Output ``name``: the caller's (given), else allocated as ``like()`` makes it."""
        if name in self.given:
            return self.given[name]
        return self.allocate(name, like())

    def add_scratch(self, name: str, sizes, strides, dtype) -> None:
        self.scratch_names[name] = (len(self.scratch), 0)
        self.scratch.append((tuple(sizes), tuple(strides), dtype))

    def substitute(self, name: str, device_copy) -> None:
        """Host values of argument ``name`` were checked and copied to the device: the launches read the copy, and
        the plan serves this call alone."""
        self.substitutes[self.op.index[name]] = device_copy
        self.cacheable = False
        self._infos.pop(name, None)

    def source(self, name: str):
        """Where tensor ``name``'s pointer comes from: (ARGUMENT, index), (OUTPUT, index), (SCRATCH, index, bytes
        added), or None (no tensor given: an int, or None)."""
        if name in self.scratch_names:
            index, add = self.scratch_names[name]
            return (SCRATCH, index, add)
        if name in self.allocated:
            return (OUTPUT, self.allocated[name][0])
        if name in self.aliases:
            return self.source(self.aliases[name])
        if name not in self.given and name not in self.op.index:
            return None  # a place of the plan's own (a workspace tensor) that this plan does not have
        value = self[name]
        if value is None or type(value) in (int, float):
            return None
        return (ARGUMENT, self.index_of(name))

    def launch(self, bound, field_names, values, pointers, integers=(), maps=None) -> Launch:
        """A launch of ``bound`` with parameter ``values`` (field_names' order): ``pointers`` (field, tensor name,
        bytes added) refilled per call, ``integers`` (field, int argument name) refilled per call, ``maps`` None or
        (fields, (tensor names), encode)."""
        fields = {f: i for i, f in enumerate(field_names)}
        template = list(values)
        slots = []
        for f, name, add in pointers:
            if f not in fields:
                continue
            template[fields[f]] = add
            source = self.source(name)
            if source is not None:
                kind, index, *extra = source
                slots.append((fields[f], kind, index, add + sum(extra)))
        numbers = [(fields[f], self.schema.int_index(name)) for f, name in integers]
        for f, _ in numbers:
            template[f] = 0
        if maps is not None:
            names, arguments, encode = maps
            maps = ([fields[n] for n in names], [self.index_of(a) for a in arguments], encode)
            for f in maps[0]:
                template[f] = bytes(128)
        return Launch(bound, template, slots, numbers, maps)

    def overlaps(self, written, checked, windows: bool = True) -> list:
        """The overlap checks of ``written`` tensors against ``checked`` ones (names; absent ones skipped), between
        tensors the caller passes (an allocated output overlaps nothing): byte spans relative to each pointer, and
        the interleaving window of two slices of one buffer where ``windows``."""
        out = []
        for w in written:
            sw = self.source(w)
            if sw is None or sw[0] != ARGUMENT:
                continue
            wi = self.info(w)
            for c in checked:
                sc = self.source(c)
                if c == w or sc is None or sc[0] != ARGUMENT or sc[1] == sw[1]:
                    continue
                ci = self.info(c)
                w_lo, w_hi = (b - wi.ptr for b in wi.byte_span())
                c_lo, c_hi = (b - ci.ptr for b in ci.byte_span())
                out.append((sw[1], sc[1], w_lo, w_hi, c_lo, c_hi, interleaving(wi, ci) if windows else None))
        return out

    def plan(self, device: int, launches, *, overlaps=(), bounds=(), ordered=(), after=None) -> Plan:
        """The plan of this call: its launches, the outputs allocated, the results returned (each of the schema's
        that the form wants; the in-place op's none), the tensors written."""
        schema, form = self.schema, self.form
        returns = []
        if not (form.inplace and schema.inplace_op):
            for result, wanted in zip(schema.results, form.wanted()):
                source = self.source(result.name) if wanted else None
                returns.append(None if source is None else source[1] if source[0] == OUTPUT else -1 - source[1])
        bumps = []
        for a in schema.args:  # (one written only with a flag is written by the plan's Python step, which bumps it)
            if a.role == "written" and a.written_with is None and self.source(a.name):
                bumps.append(self.index_of(a.name))
        bumps += [i for n, i in self.extra_index.items() if self.given[n] is not None]
        if form.inplace:
            bumps += [self.op.index[r.in_place_of] for r in schema.results if r.in_place_of is not None
                      and self[r.in_place_of] is not None]
        outputs = [(tuple(t.shape), tuple(t.stride()), t.dtype) for _, t in sorted(self.allocated.values(),
                                                                                   key=lambda e: e[0])]
        return Plan(device, list(launches), outputs, list(self.scratch), returns, list(overlaps), list(bounds),
                    list(ordered), sorted(set(bumps)), self.cacheable, dict(self.substitutes), after)


def fused(bound, first: Launch, second: Launch, first_fields: int) -> Launch:
    """One launch of ``bound``, whose parameter struct is ``first``'s leading ``first_fields`` fields followed by
    ``second``'s (the decode step's fused kernel: the attention's fields but the query tokens', which a decode kernel
    holds last and a step's one token a row does not take, then the append's)."""
    assert all(f < first_fields for f, *_ in first.pointers) and all(f < first_fields for f, _ in first.integers)
    shift = first_fields
    return Launch(bound, first.template[:first_fields] + second.template,
                  first.pointers + [(f + shift, *rest) for f, *rest in second.pointers],
                  first.integers + [(f + shift, a) for f, a in second.integers], first.maps)


def takes(fn, arguments: dict) -> dict:
    """The entries of ``arguments`` that function ``fn`` has a parameter for (a planner given a call's arguments)."""
    names = _PARAMETERS.get(fn)
    if names is None:
        import inspect

        names = _PARAMETERS[fn] = frozenset(inspect.signature(fn).parameters)
    return {k: v for k, v in arguments.items() if k in names}


_PARAMETERS: dict = {}


RUNTIMES: dict = {}  # public op name -> its OpRuntime (each <op>_api module makes its own)


class OpRuntime:
    """An op's runtime: its schema, its planner and its one plan cache (see the module docstring)."""

    def __init__(self, schema: OpSchema, planner, *, torch_module: str | None = None, overlap_message=None) -> None:
        RUNTIMES[schema.name] = self
        self.schema, self.planner = schema, planner
        # the runtime module whose register(runtime) defines the op's torch ops and returns cukiln.torch's wrapper
        self.torch_module = torch_module
        self.wrapper = None
        self.native_callers = None  # variant name -> its native caller, once the torch ops are registered
        self.index = schema.index
        self.number_or_tensor = {a.name for a in schema.args if a.type in NUMBER_OR_TENSOR}
        # the kernel dtypes each tensor takes (an output given as parts: each part's)
        self.dtypes = {p: a.dtypes for a in schema.args for p in (a.parts or (a.name,)) if a.dtypes}
        self.forms = {(f.key()): f for f in schema.forms()}
        self.per_call = schema.per_call()
        # each op argument's default where the torch schema gives one (the trailing ones): a traced call may leave them
        # out of the arguments it hands a Python kernel
        self.op_defaults = schema.op_default_values()
        from . import binder

        self.key = binder.build(binder.key_source(schema), "key", {})  # the plan-cache key of a call's arguments
        self.plans = PlanCache()
        self.overlap_message = overlap_message
        on_change(lambda: self.plans.clear())  # a forced dispatch choice changes what the plans would be

    def form(self, flags: tuple = (), given: tuple = ()) -> Form:
        """The form of a call setting ``flags`` (the schema's, in order) and giving the outputs marked in
        ``given``."""
        form = self.forms.get((flags, given))  # the generated callers pass bools
        if form is None:
            flags, given = tuple(map(bool, flags)), tuple(map(bool, given))
            form = self.forms.get((flags, given))
        if form is None:  # a form no torch op serves (in place with an out): planned in Python, which refuses it
            from .schema import Form as _Form

            form = _Form(self.schema, dict(zip((f.name for f in self.schema.flags()), map(bool, flags))),
                         tuple(o.name for o, g in zip(self.schema.outputs(), given) if g))
        return form

    def plan(self, args: tuple, form: Form, outputs: tuple = (), keep_call: bool = False) -> Plan:
        """Validate and plan a call (raises the error that explains a bad one, an overlap of what it writes with
        what it reads included). ``keep_call``: the plan keeps the Call (its tensors: for a plan not cached)."""
        call = Call(self, tuple(args), form, tuple(outputs))
        plan = self.planner(call)
        if keep_call:
            plan.call = call
        hit = plan.overlapping(call.full)
        if hit is not None:
            names = [o.source for o in self.schema.op_arguments()] + list(form.extras())
            written, checked = names[hit[0]], names[hit[1]]
            raise ValueError(self.overlap_message(written, checked) if self.overlap_message else
                             f"{written}: overlaps {checked}")
        return plan

    def validate(self, args: tuple, form: Form, outputs: tuple = ()) -> None:
        """Validate a call as plan() does, on tensors of any device and, for a float64 reference, wider dtypes
        (standing_for): the one rule a reference and the kernels refuse by. Nothing is bound or launched."""
        # (the planners check what a call writes against what it reads on the TensorInfos themselves)
        self.planner(Call(self, tuple(args), form, tuple(outputs), validating=True))

    def complete(self, args: tuple) -> tuple:
        """An op call's arguments with the trailing ones it left out (their schema defaults) put back."""
        return args if len(args) >= len(self.op_defaults) else args + self.op_defaults[len(args):]

    def run(self, args: tuple, form: Form, outputs: tuple = ()):
        """A call in Python (``outputs``: the tensors its form gives past the op's arguments): its plan from the
        cache (checked) or planned, replayed. Returns what the op (or variant) returns."""
        full = args + tuple(outputs) if outputs else args
        try:
            key = (form.variant, self.key(args, outputs))
            plan = self.plans.get(key)
        except (AttributeError, TypeError):  # not tensors, unhashable values: the planner explains
            key, plan = None, None
        if plan is None or (plan.checked and not plan.passes(full)):
            plan = self.plan(args, form, outputs)
            if key is not None and plan.cacheable and not plan.peculiar:
                self.plans.put(key, plan)
        return _op_result(plan.run(full), self.schema, form)

    def torch_wrapper(self):
        """cukiln.torch's wrapper of this op: its torch ops defined on first use (``torch_module``'s register)."""
        if self.wrapper is None:
            import importlib

            self.wrapper = importlib.import_module(f"cukiln.{self.torch_module}").register(self)
        return self.wrapper

    def load_native(self):
        """The native hot path's callers of every form of the public call (variant name -> caller), or False
        where the native path does not serve the op: the torch ops registered first."""
        if self.torch_module is None:
            return False
        self.torch_wrapper()
        return self.native_callers or False

    def miss(self, form: Form):
        """The native hot path's miss for calls of ``form`` (runtime/native.py): run the call, describe its plan."""
        count = len(self.schema.op_arguments())

        def miss(*arguments):
            args, outputs = arguments[:count], arguments[count:]
            plan = self.plan(args, form, outputs)
            returned = plan.run(args + outputs)
            return _op_result(returned, self.schema, form), False if plan.peculiar else plan.description()

        return miss


# What a float64 reference's validation takes the GPU to be (its choices of launch do not change what is valid)
VALIDATION_ARCH, VALIDATION_SMS = "sm_90", 132
# A wider dtype a reference takes, as the kernel dtype it stands for: the first of the argument's that it widens
_WIDENS = {"float64": ("fp32", "bf16", "fp16"), "int64": ("int32",)}


def standing_for(t, name: str, accepts) -> TensorInfo:
    """The TensorInfo of a reference's tensor (any device: the CPU as device -1): a float64 or int64 tensor where
    the argument takes narrower dtypes described as the one it stands for, its pointer moved to a space of its own,
    scaled so that the byte extents of such tensors compare as the narrower tensors' would (two slices of one float64
    buffer overlap, or not, as the same slices of a float32 one)."""
    import torch

    if isinstance(t, torch.Tensor):
        wide = str(t.dtype).replace("torch.", "")
        stands = next((d for d in _WIDENS.get(wide, ()) if accepts and d in accepts and wide != d), None)
        if stands is not None and wide not in (accepts or ()):
            size = ITEMSIZE[stands]
            return TensorInfo((1 << 60) + t.data_ptr() * size // t.element_size(), tuple(t.shape), tuple(t.stride()),
                              stands, t.get_device())
    return from_torch(t, name, accepts or tuple(ITEMSIZE), cuda=False)


def public(runtime: OpRuntime, form: Form, result, args: tuple):
    """What a public call returns, from its op's (or variant's) ``result``: the in-place op's inputs, or the results
    the call asked for."""
    schema = runtime.schema
    if form.inplace and schema.inplace_op:
        targets = tuple(args[runtime.index[r.in_place_of]] for r in schema.results)
        return targets[0] if len(targets) == 1 else targets
    if len(schema.results) == 1:
        return result
    kept = [value for value, wanted in zip(result, form.wanted()) if wanted]
    return kept[0] if len(kept) == 1 else tuple(kept)


def _op_result(returned: tuple, schema: OpSchema, form: Form):
    """A plan's returns as the torch op (or variant) returns them: none for the in-place op, one value, or a
    tuple (a variant's value not asked for as None)."""
    if form.inplace and schema.inplace_op:
        return None
    if len(schema.results) == 1:
        return returned[0]
    return tuple(returned)


# --- the functions built from a schema (runtime/binder.py) ---------------------------------------------------------

def renamed(who: str, old: str, new: str, value, current, default):
    """An older spelling given: its value for ``new`` (DeprecationWarning), unless ``new`` was given too."""
    import warnings

    if current is not default and current != default:
        raise TypeError(f"{who}: {old} is the older spelling of {new}; give one of them, not both")
    warnings.warn(f"{who}: {old}= is now {new}= ({old} is attention's logit scale in cukiln)", DeprecationWarning,
                  stacklevel=3)
    return value


def namespace_of(runtime: OpRuntime) -> dict:
    """What every function built from the op's schema reads (runtime/binder.py)."""
    from . import rotary
    from .interop import TORCH_TYPES, call_with_foreign_arrays
    from .tensors import refuse_untracked_gradients

    return {"_TORCH_KNOWN": TORCH_TYPES.known, "_is_torch": TORCH_TYPES.is_torch, "_foreign": call_with_foreign_arrays,
            "_renamed": renamed, "_rotary": rotary.unpack, "_refuse": refuse_untracked_gradients, "_RUNTIME": runtime,
            "_public": public}


def bind_public(runtime: OpRuntime):
    """The public function of ``runtime``'s op (binder.public_source), through the native hot path where it loads."""
    from . import binder

    name = runtime.schema.name
    cell = [None]  # the native callers by variant (OpRuntime.load_native), False where off; None until needed

    def load_native():
        cell[0] = runtime.load_native()
        return cell[0]

    namespace = dict(namespace_of(runtime), _NATIVE=cell, _load_native=load_native)
    function = binder.build(binder.public_source(runtime.schema, runtime.schema.docstring()), name, namespace)
    function.__module__ = f"cukiln.{name}"
    runtime.public = function
    return function


def bind(runtime: OpRuntime) -> tuple:
    """The functions an op's module exports, built from its schema: (its public function, ``planned(...)`` -> the
    call's Plan, ``arguments(...)`` -> (op arguments, form, outputs given), ``plan_call(...)`` -> the planner's own
    plan, Plan.detail, for checks and measurements). Each takes the public function's arguments; none launches."""
    planned = bind_planning(runtime)

    def plan_call(*args, **kwargs):
        return planned(*args, **kwargs).detail

    plan_call.__doc__ = (f"Validate a {runtime.schema.name}() call and plan it without launching: the planner's own "
                         "plan (None where there is nothing to launch).")
    return bind_public(runtime), planned, bind_arguments(runtime), plan_call


def bind_planning(runtime: OpRuntime):
    """``planned(...)``: the public function's arguments, validated and planned without a launch (its Plan)."""
    from . import binder

    return binder.build(binder.planning_source(runtime.schema), "planned", namespace_of(runtime))


def bind_arguments(runtime: OpRuntime):
    """``arguments(...)``: the public function's arguments as the op takes them, (args, form, extras), for tests and
    tools that call the op or its plans directly."""
    from . import binder

    return binder.build(binder.arguments_source(runtime.schema), "arguments", namespace_of(runtime))
