"""Hypothesis strategies for random valid einsum graphs (shared by the test suite)."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from solar_io.affine import parse_access
from solar_io.graph import Graph, Node, Producer, Tensor, Validation
from solar_io.ops import MAP_OPS

FLOAT_DTYPES = ["fp32", "bf16", "fp16", "fp8_e4m3", "nvfp4", "fp64"]
UNARY = [m.name for m in MAP_OPS.values() if m.arity == 1 and m.result == "same"]
NARY = ["add", "mul", "max", "min"]
REDUCE = ["add", "max", "min", "mul"]

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}(\.[a-z0-9]{1,4})?", fullmatch=True)
free_text = st.text(min_size=1, max_size=20)


def _scatters_into(src: Tensor, target: Tensor) -> bool:
    """True when ``target[@idx, rest] = src[S, rest]`` is a valid scatter (``S`` any rank not in ``rest``)."""
    return src.name != target.name and len(src.ranks) == len(target.ranks) > 0 and src.ranks[1:] == target.ranks[1:]


@st.composite
def graphs(draw, max_nodes: int = 6, max_size: int = 6, text=free_text, in_place: bool = False) -> Graph:
    """A random valid graph: einsum (with scans), scatter, copy, reshape and opaque nodes over small ranks.

    ``in_place``: a scatter may start from an earlier scatter's result (a chain ``x[p] = a; x[q] = b``),
    and a chain's result that nothing reads is an output that ``updates`` the input the chain starts
    from (format 1.5)."""
    n_ranks = draw(st.integers(1, 5))
    ranks = [(f"R{i}", draw(st.integers(1, max_size))) for i in range(n_ranks)]
    sizes = dict(ranks)
    rank_names = [r for r, _ in ranks]
    prefix = draw(names)
    tensors: list[Tensor] = []
    readable: list[Tensor] = []
    for i in range(draw(st.integers(1, 3))):
        rs = draw(st.lists(st.sampled_from(rank_names), unique=True, max_size=3))
        t = Tensor(f"{prefix}_in{i}", tuple(rs), draw(st.sampled_from(FLOAT_DTYPES)),
                   draw(st.sampled_from(["input", "weight"])),
                   density=draw(st.none() | st.floats(0.01, 1.0)))
        tensors.append(t)
        readable.append(t)
    nodes: list[Node] = []
    consumed: set[str] = set()
    chain_of: dict[str, str] = {}  # scatter result -> the input its chain of scatters starts from
    for k in range(draw(st.integers(1, max_nodes))):
        kind = draw(st.sampled_from(["einsum", "einsum", "scatter", "copy", "reshape", "opaque"]
                                    + ["scatter"] * (2 * in_place)))
        if kind == "scatter" and not any(t.ranks for t in readable):
            kind = "einsum"
        out_name = f"{prefix}_t{k}"
        dt = draw(st.sampled_from(FLOAT_DTYPES))
        if kind == "einsum":
            ins = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3))
            space = list(dict.fromkeys(r for t in ins for r in t.ranks))
            space += draw(st.lists(st.sampled_from(rank_names), unique=True, max_size=1))
            space = list(dict.fromkeys(space))
            reduce_op = draw(st.sampled_from(["none"] + REDUCE)) if space else "none"
            out_ranks = space if reduce_op == "none" else [r for r in space if draw(st.booleans())]
            if reduce_op != "none" and len(out_ranks) == len(space):
                reduce_op = "none"
            map_op = draw(st.sampled_from(UNARY)) if len(ins) == 1 else draw(st.sampled_from(NARY))
            out = Tensor(out_name, tuple(out_ranks), dt, "intermediate")
            scan = draw(st.none() | st.sampled_from(out_ranks)) if out_ranks and reduce_op in REDUCE else None
            node = Node(f"n{k}", "einsum", draw(text), tuple(parse_access(f"{t.name}[{', '.join(t.ranks)}]")
                                                               for t in ins),
                        (parse_access(f"{out_name}[{', '.join(out_ranks)}]"),), space=tuple(space),
                        map=map_op, reduce=reduce_op, location=draw(st.none() | text), scan=scan)
        elif kind == "scatter":
            # out[@idx, rest] combines src[r0, rest] into a copy of init; idx is an immediate (all zeros).
            # in_place: the scattered rank of the target may be another rank than the source's first
            chained = [t for t in readable if t.name in chain_of and t.name not in consumed
                       and any(_scatters_into(o, t) for o in readable)] if in_place else []
            if chained and draw(st.booleans()):  # the next step of a chain: into an earlier scatter's result
                init = draw(st.sampled_from(chained))
                src = draw(st.sampled_from([o for o in readable if _scatters_into(o, init)]))
            else:
                src = draw(st.sampled_from([t for t in readable if t.ranks]))
                target = draw(st.sampled_from([r for r in rank_names if r not in src.ranks[1:]])) if in_place \
                    else src.ranks[0]
                init = Tensor(f"{prefix}_init{k}", (target, *src.ranks[1:]), dt, "input")
            idx = Tensor(f"{prefix}_idx{k}", src.ranks[:1], "int64", "constant", value=0.0)
            dt = init.dtype
            out = Tensor(out_name, init.ranks, dt, "intermediate")
            chain_of[out_name] = chain_of.get(init.name, init.name)
            index = ", ".join([f"@{idx.name}", *src.ranks[1:]])
            node = Node(f"n{k}", "einsum", "scatter", (parse_access(f"{init.name}[{index}]"),
                                                       parse_access(f"{src.name}[{', '.join(src.ranks)}]"),
                                                       parse_access(f"{idx.name}[{src.ranks[0]}]")),
                        (parse_access(f"{out_name}[{index}]"),), space=src.ranks, map="identity",
                        reduce=draw(st.sampled_from(["none"] + REDUCE)), init=init.name)
            tensors += [idx] if init.name in chain_of else [idx, init]
            ins = [src, init] if init.name in chain_of else [src]
        elif kind == "copy":
            src = draw(st.sampled_from(readable))
            perm = draw(st.permutations(list(src.ranks)))
            out = Tensor(out_name, tuple(perm), src.dtype, "intermediate")
            node = Node(f"n{k}", "data_movement", "permute",
                        (parse_access(f"{src.name}[{', '.join(src.ranks)}]"),),
                        (parse_access(f"{out_name}[{', '.join(perm)}]"),), space=tuple(perm),
                        movement="copy", view=draw(st.booleans()))
            ins = [src]
        elif kind == "reshape":
            src = draw(st.sampled_from(readable))
            numel = math.prod(sizes[r] for r in src.ranks)
            flat = f"F{k}"
            ranks.append((flat, numel))
            sizes[flat] = numel
            out = Tensor(out_name, (flat,), src.dtype, "intermediate")
            node = Node(f"n{k}", "data_movement", "reshape", (parse_access(src.name),),
                        (parse_access(out_name),), movement="reshape", view=draw(st.booleans()))
            ins = [src]
        else:
            ins = draw(st.lists(st.sampled_from(readable), min_size=0, max_size=2, unique_by=lambda t: t.name))
            rs = draw(st.lists(st.sampled_from(rank_names), unique=True, max_size=2))
            out = Tensor(out_name, tuple(rs), dt, "intermediate")
            node = Node(f"n{k}", "opaque", draw(text), tuple(parse_access(t.name) for t in ins),
                        (parse_access(out_name),), reason=draw(text.filter(str.strip)),
                        attrs=tuple(sorted(draw(st.dictionaries(names, st.integers() | st.booleans() | text,
                                                                max_size=2)).items())))
        consumed.update(t.name for t in ins)
        tensors.append(out)
        readable.append(out)
        nodes.append(node)
    tensors = [t if t.role != "intermediate" or t.name in consumed else
               Tensor(t.name, t.ranks, t.dtype, "output", t.density, t.value,
                      updates=chain_of.get(t.name) if in_place else None) for t in tensors]
    validation = draw(st.sampled_from([
        Validation(),
        Validation("passed", "numeric", reference=draw(text), seed=draw(st.integers(0, 2**31)),
                   rtol=draw(st.floats(0, 1)), atol=draw(st.floats(0, 1)),
                   max_abs_error=draw(st.floats(0, 1e30)), reduced_ranks=(("R0", 1),)),
        Validation("passed", "reference-executor", model=draw(text), attempts=draw(st.integers(1, 9))),
    ]))
    producer = Producer(tool_version="0.1.0", frontend=draw(st.sampled_from(["hand-written", "torch"])),
                        source=draw(st.none() | text))
    return Graph(ranks=tuple(ranks), tensors=tuple(tensors), nodes=tuple(nodes), producer=producer,
                 validation=validation, name=draw(st.none() | text))
