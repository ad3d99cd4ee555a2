"""Ops specialized to a traced call's constants (runtime/specialize.py), on the CPU: which arguments such an op
keeps, its name, that torch.compile's graph calls it and torch.export's does not, and that its Python kernel runs
the op's own with the constants put back (the same launch, byte for byte). Its C++ kernels run in the GPU tests."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln.torch as ct  # noqa: E402
from cukiln import native, specialize  # noqa: E402

from .test_native import _op_args, launches  # noqa: E402,F401  (launches: a fixture)

pytestmark = pytest.mark.skipif(native.module() is None, reason="the native hot path is off")


def _step_inputs():
    q = torch.randn(1, 32, 128, dtype=torch.bfloat16)
    k, v = torch.randn(1, 8, 128, dtype=torch.bfloat16), torch.randn(1, 8, 128, dtype=torch.bfloat16)
    caches = torch.zeros(1, 8, 64, 128, dtype=torch.bfloat16), torch.zeros(1, 8, 64, 128, dtype=torch.bfloat16)
    return q, k, v, *caches, torch.full((1,), 5, dtype=torch.int32)


def _step_args(tensors, table, base=None, advance=False):
    return (*tensors, "bhsd", None, 0, None, None, None, None, table, None, base, 1.0, 1.0, False, None, 0, None,
            None, 1e-6, None, None, None, advance, None, None, None, None, None, None)


def _arguments(op) -> list[str]:
    return [f"{a.type}{'!' if a.alias_info is not None and a.alias_info.is_write else ''}"
            for a in op._schema.arguments]


def _symbols(*values):
    """A torch.SymInt or SymFloat for each of ``values``, as torch.compile traces a number that changed between
    calls."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    made = []
    for i, v in enumerate(values):
        source = ConstantSource(f"n{i}")
        if type(v) is int:
            made.append(env.create_symintnode(env.create_symbol(v, source, dynamic_dim=DimDynamic.DYNAMIC), hint=v))
        else:
            made.append(env.create_symfloatnode(env.create_unspecified_symbol(v, source,
                                                                              dynamic_dim=DimDynamic.DYNAMIC),
                                                hint=v))
    return made


def test_a_specialized_op_keeps_the_calls_tensors_symbols_and_mutation():
    tensors, table = _step_inputs(), torch.rand(4096, 128)
    op, given = specialize.specialization("decode_step", _step_args(tensors, table))
    assert op.name().startswith("cukiln::decode_step__")
    # plain numbers are constants of the graph, as the Nones, bools and strings are: the step's tensors alone
    assert [a.name for a in op._schema.arguments] == [
        "q", "k_new", "v_new", "k_cache", "v_cache", "kv_lens", "cos_sin_cache"]
    # kv_lens read-only: the step writes it only with advance_lens, here the constant False
    assert _arguments(op) == ["Tensor", "Tensor", "Tensor", "Tensor!", "Tensor!", "Tensor", "Optional[Tensor]"]
    advancing, _ = specialize.specialization("decode_step", _step_args(tensors, table, advance=True))
    assert _arguments(advancing) == ["Tensor", "Tensor", "Tensor", "Tensor!", "Tensor!", "Tensor!", "Optional[Tensor]"]
    assert all(g is t for g, t in zip(given, (*tensors, table))) and len(given) == 7
    assert str(op._schema).endswith("-> (Tensor, Tensor)")
    # a number traced as a symbol stays an argument, typed as the op types it
    q, k, v, k_cache, v_cache, _ = tensors
    kv_len, kv_start, base, eps = _symbols(9, 3, 1e4, 1e-6)
    append, given = specialize.specialization("kv_append", (q, k, v, k_cache, v_cache, None, kv_len, "bhsd", None,
                                                            kv_start, *(None,) * 6, base, 1.0, 1.0, False, None, 0,
                                                            None, None, eps, None, None, None, None, None, None))
    assert [a.name for a in append._schema.arguments] == ["q", "k_new", "v_new", "k_cache", "v_cache", "kv_len",
                                                         "kv_start", "base", "norm_eps"]
    assert [str(a.type) for a in append._schema.arguments[5:]] == ["int", "int", "Optional[float]", "float"]
    assert given[5:] == [kv_len, kv_start, base, eps]


def test_the_name_follows_the_constants():
    tensors, table = _step_inputs(), torch.rand(4096, 128)
    first, _ = specialize.specialization("decode_step", _step_args(tensors, table, base=1e4))
    again, _ = specialize.specialization("decode_step", _step_args(_step_inputs(), torch.rand(8, 128), base=1e4))
    assert first is again, "other tensors: the same op"
    other_base, _ = specialize.specialization("decode_step", _step_args(tensors, table, base=5e5))
    no_base, _ = specialize.specialization("decode_step", _step_args(tensors, table))  # a None more
    assert len({first.name(), other_base.name(), no_base.name()}) == 3
    # an int where the schema says float is that float: the same op
    as_int, _ = specialize.specialization("decode_step", _step_args(tensors, table, base=10000))
    assert as_int is first
    # a NaN constant (no number equals it) names one op too
    nan, _ = specialize.specialization("decode_step", _step_args(tensors, table, base=float("nan")))
    assert specialize.specialization("decode_step", _step_args(tensors, table, base=float("nan")))[0] is nan


@pytest.mark.parametrize("name, value", [("positions", 5), ("rotary_dim", 64.0), ("layout", 3), ("interleaved", 1),
                                         ("mrope_section", [1, "2"]), ("freqs", 2.0), ("rotary_dim", 1 << 70)])
def test_a_value_not_of_the_schemas_type_takes_the_op_itself(name, value):
    # positions an int, rotary_dim a float, layout an int, interleaved an int, mrope_section not of ints, freqs a
    # float, rotary_dim beyond int64: the op's own kernel explains each, and nothing is defined
    from cukiln import rope_api

    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    args = list(_op_args(x, base=10000.0))
    args[rope_api.RUNTIME.index[name]] = value
    assert specialize.specialization("rope_", tuple(args)) is None


def test_without_the_native_path_every_call_takes_the_op_itself(monkeypatch):
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    monkeypatch.delitem(specialize.NATIVE_HANDLES, "rope_")
    assert specialize.specialization("rope_", _op_args(x, base=10000.0)) is None
    assert _graph_ops(lambda x: ct.rope(x, base=3e4, inplace=True), x) == ["cukiln.rope_.default"]


def test_a_failed_definition_leaves_nothing_behind(monkeypatch):
    from cukiln import native

    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    args = _op_args(x, base=10000.0, layout="bshd")

    def refuse(*arguments):
        raise RuntimeError("refused")

    monkeypatch.setattr(native, "register_specialized", refuse)
    with pytest.raises(RuntimeError, match="refused"):
        specialize.specialization("rope_", args)
    monkeypatch.undo()
    op, _ = specialize.specialization("rope_", args)  # defined afresh, under the same name
    assert op.name().startswith("cukiln::rope___")


def test_the_specialized_kernel_is_the_ops_own(launches):
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    freqs = torch.rand(8, 64)
    args = _op_args(x, freqs=freqs, offsets=2)
    torch.ops.cukiln.rope_.default(*args)
    op, given = specialize.specialization("rope_", args)
    assert [a.name for a in op._schema.arguments] == ["x", "freqs"]
    op(*given)
    assert len(launches) == 2 and launches[0] == launches[1], "the same kernel and parameters"
    op, given = specialize.specialization("rope_", _op_args(x, freqs=freqs, rotary_dim=65))
    with pytest.raises(ValueError, match="rotary_dim"):  # and its errors
        op(*given)


def _capturing(graphs: list):
    """A torch.compile backend that keeps the graph AOTAutograd hands the compiler (where a cukiln.torch wrapper's
    ops appear, its call being one node of Dynamo's graph) in ``graphs`` and runs it."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    def capture(gm, example_inputs):
        def record(graph, inputs):
            graphs.append(graph)
            return make_boxed_func(graph.forward)

        return aot_module_simplified(gm, example_inputs, fw_compiler=record)

    return capture


def _ops_of(graph) -> list[str]:
    """The cukiln ops ``graph`` calls, in order: an op that mutates an input appears as its own name there, in place
    of the functional wrapper that stands for it."""
    nodes = [n for n in graph.graph.nodes if n.op == "call_function"]
    targets = (n.args[0] if "auto_functionalized" in str(n.target) else n.target for n in nodes)
    return [t for t in targets if str(t).startswith("cukiln.")]


def _graph_nodes(fn, *args) -> list:
    """The cukiln ops of the graph torch.compile makes of ``fn`` (_capturing), which raises when run (CPU
    tensors)."""
    graphs = []
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        torch.compile(fn, backend=_capturing(graphs), fullgraph=True)(*args)
    return _ops_of(graphs[0])


def _graph_ops(fn, *args) -> list[str]:
    """The cukiln ops of the graph torch.compile makes of ``fn`` (_graph_nodes)."""
    return [str(op) for op in _graph_nodes(fn, *args)]


def test_compiled_wrappers_call_specialized_ops():
    tensors, table = _step_inputs(), torch.rand(4096, 128)
    ops = _graph_ops(lambda *t: ct.decode_step(*t, cos_sin_cache=table), *tensors)
    assert any(o.startswith("cukiln.decode_step__") for o in ops), ops
    assert _graph_ops(lambda x: ct.rope(x, base=1e4, inplace=True), torch.randn(2, 1, 4, 64))[0].startswith(
        "cukiln.rope___")
    q, k_cache = tensors[0], tensors[3]
    ops = _graph_ops(lambda q: ct.decode_attention(q, k_cache, k_cache, 5), q)
    assert ops[0].startswith("cukiln.decode_attention__"), ops


def _graph_schemas(fn, *args) -> list[str]:
    """The cukiln ops' schemas in the graph torch.compile makes of ``fn`` (_graph_nodes)."""
    return [str(op._schema) for op in _graph_nodes(fn, *args)]


def test_a_traced_attention_call_without_lse_takes_an_op_returning_out_alone():
    # a compiled graph then holds one output, from the variant that allocates no lse; asked for, lse comes back
    tensors, table = _step_inputs(), torch.rand(4096, 128)
    q, k_cache = tensors[0], tensors[3]
    for call in (lambda q, lse: ct.decode_attention(q, k_cache, k_cache, 5, return_lse=lse),
                 lambda q, lse: ct.decode_step(q, *tensors[1:], cos_sin_cache=table, return_lse=lse)):
        (alone,) = _graph_schemas(lambda q: call(q, False), q)
        (both,) = _graph_schemas(lambda q: call(q, True), q)
        assert alone.endswith(") -> Tensor") and both.endswith(") -> (Tensor, Tensor)"), (alone, both)
        assert alone.split("(")[0] != both.split("(")[0]  # two ops, named apart
    op, given = specialize.specialization("decode_attention", (q, k_cache, k_cache, None, 5, "bhsd", None, 0, None,
                                                               None, None, False, None, None, None, None, None,
                                                               None, None), lse=False)
    assert str(op._schema).endswith(") -> Tensor")


def test_only_a_variant_may_specialize_to_fewer_returns():
    # the op itself returns a tensor for its lse, which a specialization returning out alone would leave on the stack
    q = _step_inputs()[0]
    args = (q, q, q, None, 5, "bhsd", None, 0, None, None, None, False, None, None, None, None, None, None, None)
    op, given = specialize.specialization("decode_attention", args, lse=False)
    # its arguments are the op's three tensors (the numbers are constants), so that the count matches and the
    # returns are what the op refuses
    assert [a.name for a in op._schema.arguments] == ["q", "k_cache", "v_cache"]
    values = [None if i < 3 else a for i, a in enumerate(args)]
    with pytest.raises(RuntimeError, match="does not match"):
        native.register_specialized(specialize.NATIVE_HANDLES["decode_attention"], op.name().split("::")[1],
                                    [0, 1, 2], values)


def test_a_compiled_step_without_advance_lens_writes_no_lengths_in_the_graph():
    # the graph's functional form of the step's op lists the inputs the op writes (their "_base_index"): kv_lens
    # among them only where the step advances the lengths
    tensors, table = _step_inputs(), torch.rand(4096, 128)
    for advance, written in ((False, ["k_cache", "v_cache"]), (True, ["k_cache", "v_cache", "kv_lens"])):
        graphs = []
        with pytest.raises(ValueError, match="expected a CUDA tensor"):
            torch.compile(lambda *t: ct.decode_step(*t, cos_sin_cache=table, advance_lens=advance),
                          backend=_capturing(graphs), fullgraph=True)(*tensors)
        (node,) = [n for n in graphs[0].graph.nodes if "auto_functionalized" in str(n.target)]
        assert [k[1:-len("_base_index")] for k in node.kwargs if k.endswith("_base_index")] == written, node.kwargs


def test_an_exported_program_names_the_op_itself():
    class Rope(torch.nn.Module):
        def forward(self, x):
            return ct.rope(x, base=1e4)

    program = torch.export.export(Rope(), (torch.randn(2, 1, 4, 64),))
    ops = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert ops == ["cukiln.rope.default"], ops


def test_the_override_keeps_the_ops_themselves():
    from cukiln import overrides

    x = torch.randn(2, 1, 4, 64)
    with overrides.forced("traced_ops", "generic"):
        assert _graph_ops(lambda x: ct.rope(x, base=2e4, inplace=True), x) == ["cukiln.rope_.default"]
    with overrides.forced("traced_ops", "specialized"), pytest.raises(ValueError, match="traced_ops override"):
        specialize.specialization("rope_", _op_args(x, base=2e4))


def test_numbers_that_change_between_calls_stay_arguments():
    # torch.compile traces a number as a plain one, a constant of its graph and of the op it calls, until it changes:
    # then (and at once with dynamic=True) as a symbol, which reaches the wrapper as one and stays an argument (the
    # ops declare a call's lengths, starts and offsets SymInt), so that one graph serves every later value: more
    # values here than torch.compile's recompile limit (8), which fullgraph=True turns into an error
    graphs = []
    q, k_cache = _step_inputs()[0], _step_inputs()[3]
    x = torch.randn(2, 1, 4, 64)
    decode = torch.compile(lambda q, n: ct.decode_attention(q, k_cache, k_cache, n), backend=_capturing(graphs),
                           fullgraph=True)
    rope = torch.compile(lambda x, n: ct.rope(x, base=1e4, offsets=n), backend=_capturing(graphs), fullgraph=True,
                         dynamic=True)
    for fn, tensor, op, taken, compiles in ((decode, q, "cukiln.decode_attention", "kv_len", 2),
                                            (rope, x, "cukiln.rope", "offset", 1)):
        graphs.clear()
        for n in range(3, 14):
            with pytest.raises(ValueError, match="expected a CUDA tensor"):
                fn(tensor, n)
        assert len(graphs) == compiles, graphs
        calls = [[node for node in graph.graph.nodes if str(node.target).startswith(op + "__")] for graph in graphs]
        assert all(len(c) == 1 for c in calls), graphs
        if op == "cukiln.decode_attention":  # n plain in the first call: a constant of its op
            assert taken not in [a.name for a in calls[0][0].target._schema.arguments]
        node = calls[-1][0]
        names = [a.name for a in node.target._schema.arguments]
        assert taken in names and isinstance(node.args[names.index(taken)], torch.fx.Node), node.args  # a symbol


def test_a_call_needing_autograd_runs_the_ops_autograd_on_the_ops_arguments(launches):
    # the C++ gate of a specialized op (the Autograd key: it runs on the CPU too) puts the constants back and calls
    # the op's autograd kernel: the same launch as the op's own call, and a gradient that flows
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16, requires_grad=True)
    freqs = torch.rand(8, 64)
    args = _op_args(x, freqs=freqs, offsets=2, layout="bshd")
    want = torch.ops.cukiln.rope.default(*args)
    op, given = specialize.specialization("rope", args)
    got = op(*given)
    assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__ == "_RopeGradBackward"
    assert len(launches) == 2 and launches[0][0] == launches[1][0]
    (_, want_bytes), (_, got_bytes) = launches
    differing = [i for i, (a, b) in enumerate(zip(want_bytes, got_bytes)) if a != b]
    assert len(want_bytes) == len(got_bytes) and (not differing or differing[-1] - differing[0] < 8), \
        "the same parameters but for the fresh output's pointer"
    got.backward(torch.ones_like(got))  # the backward kernel (the rotation reversed) on the incoming gradient
    assert len(launches) == 3 and x.grad is not None


def test_a_compiled_call_guards_on_its_own_arguments_alone():
    # a cukiln.torch wrapper is one node of torch.compile's graph (torch_support.one_graph_node): no guard on what
    # its Python reads (its defaults, its modules' globals, builtins), each evaluated on every call of the compiled
    # function; and none evaluated in Python that names cukiln (an object reached through two modules' globals)
    import io
    import logging

    text = io.StringIO()
    handler = logging.StreamHandler(text)
    torch._logging.set_logs(guards=True)
    logging.getLogger("torch._dynamo").addHandler(handler)
    tensors, table = _step_inputs(), torch.rand(4096, 128)
    q, k_cache = tensors[0], tensors[3]
    try:
        for fn, args in ((lambda q: ct.decode_attention(q, k_cache, k_cache, 5), (q,)),
                         (lambda *t: ct.decode_step(*t, cos_sin_cache=table), tensors),
                         (lambda x: ct.rope(x, base=1e4, inplace=True), (torch.randn(2, 1, 4, 64),))):
            with pytest.raises(ValueError, match="expected a CUDA tensor"):
                torch.compile(fn, backend="eager", fullgraph=True)(*args)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(handler)
        torch._logging.set_logs(guards=False)
    guards = [line for line in text.getvalue().splitlines() if "+- " in line]
    assert len([line for line in guards if "decode_attention" in line]) > 0, "the guards were logged"
    aliases = [line for line in guards if "LAMBDA_GUARD" in line and "cukiln" in line]
    assert not aliases, aliases
    wrapper_reads = [line for line in guards if "__kwdefaults__" in line or "runtime/" in line.split("#")[0]
                     or "cukiln.specialize" in line or "cukiln.torch_support" in line]
    assert not wrapper_reads, wrapper_reads
