"""Value-specialised capture: data-dependent shapes and branches fixed by the values that decide them.

``torch.export`` stops where a program's shapes or branches depend on tensor values
(``GuardOnDataDependentSymNode``): ``if not mask.any():``, ``nonzero``, ``.item()``, ``.tolist()``,
boolean-mask indexing, ``bincount``, the tokens each expert receives after a router's ``topk``,
``cu_seqlens`` of varlen attention, page tables. The capture then runs twice more:

1. **Values** (:func:`specialise`). The forward runs once eagerly under two modes: ``_Tracker`` (a
   dispatch mode) keeps the CPU value of every *small* tensor whose inputs have known values (small
   integer and boolean inputs, tensors the program creates, the router choices of the routing
   model), while every large tensor stays on the ``meta`` device; ``_Decide`` (a function mode)
   answers each data-dependent call (``item``, ``__bool__``, ``tolist``, ``nonzero``, ``unique`` of ids, ...) from those
   values and records the answer. Under a synthetic routing (:mod:`.routing`) each ``topk`` over
   scores computed from weights is a router: its indices are the routing model's. A decision whose
   values are not known on meta (the routing is ``observed``, or a branch on the hidden states)
   reruns the pass on the CPU with seeded weights and inputs (the validation's), if the weights and
   inputs fit ``budget``; otherwise the meta pass is run again knowing the inputs that fit half of
   ``budget`` and computing tensors of up to ``budget`` bytes each (a ``topk`` over scores computed from
   those inputs still takes the routing model's choice), and
   where that does not decide either it is a CaptureError naming the op, where it is and what the
   tensor is computed from.
2. **Export** on meta, ``_Decide`` replaying the recorded answers in order: Python scalars become
   constants of the trace (the branch taken), data-dependent shapes become ops of fixed size
   (``solar_io::specialised_index`` for ``nonzero``/``where``/mask indexing/``repeat_interleave``,
   ``solar_io::bincount``), lowered by ``rules/select.py``.

The graph records what it assumed (:func:`assumptions`): one ``specialised`` entry per call site
(the values it fixed) and one ``routing`` entry per router (E, k, T, tokens per expert, distinct
experts). Validation forces the same router choices in the eager run (:func:`forcing`), so graph
and model compute the same function of the inputs under that routing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ...graph import Assumption
from ..common.errors import CaptureError
from .decide import _Decide
from .nvfp4 import CpuNvfp4
from .routing import Routing, assign, counts, expected_distinct, per_expert_counts
from .values import (
    SMALL_FLOAT_INPUT,
    TABLES,
    WIDE,
    Decision,
    NeedValues,
    Plan,
    Router,
    TooLarge,
    _topk_args,
    _Tracker,
    _Values,
    aten,
    forced_topk,
)
from .values import small as is_small

__all__ = ["TABLES", "Decision", "NeedValues", "Plan", "Router", "assumptions", "forcing", "needs_values",
           "replaying", "specialise"]


# --------------------------------------------------------------------------- the passes
def _label_model(values: _Values, model: torch.nn.Module, inputs: list[Any]) -> None:
    for name, p in itertools.chain(model.named_parameters(), model.named_buffers()):
        values.origin[p] = frozenset({f"weight:{name}"})
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            values.origin[x] = frozenset({f"input:{i}"})


def _chooser(routing: Routing, plan: Plan) -> Callable[[int, torch.Tensor, int, int], np.ndarray | None]:
    def choose(i: int, x: torch.Tensor, k: int, dim: int) -> np.ndarray | None:
        if not routing.forced:
            return None
        experts = int(x.shape[dim])
        tokens = int(x.numel() // experts) if experts else 0
        if k > experts or tokens == 0:
            return None
        return assign(counts(routing.mode, tokens, experts, k, routing.alpha), tokens, k)

    return choose


class _Lean(TorchDispatchMode):
    """Builds inputs on the CPU where they are small and on ``meta`` where they are not: each op runs
    on meta first; only when every result is small (:func:`.values.small`) and no argument is on meta
    does it run on the CPU. A generator's 15 GB of expert weights never exist, its token ids do.
    ``limit``: results of at most this many bytes each are small instead (the wide pass)."""

    def __init__(self, limit: int | None = None):
        super().__init__()
        self.limit = limit

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        flat = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]

        def meta(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                return a if a.device.type == "meta" else torch.empty_like(a, device="meta")
            return torch.device("meta") if isinstance(a, torch.device) else a

        writes = [args[i] for i, a in enumerate(func._schema.arguments) if i < len(args)
                  and a.alias_info is not None and a.alias_info.is_write and isinstance(args[i], torch.Tensor)]
        if any(w.device.type != "meta" for w in writes) and any(a.device.type == "meta" for a in flat):
            raise _NotLean(func)  # a CPU tensor written from a meta one: its value would be wrong
        margs, mkw = tree_map(meta, (args, kwargs))
        if "device" in mkw or func._schema.name.split("::")[-1] in _FACTORIES:
            mkw["device"] = torch.device("meta")
        out = func(*margs, **mkw)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if any(a.device.type == "meta" for a in flat) or not all(is_small(t, self.limit) for t in outs):
            return out
        return func(*args, **kwargs)


class _NotLean(Exception):
    """A generator :class:`_Lean` cannot split between the CPU and meta."""


#: ATen factories whose device is a keyword argument (set to meta for the shape-only first run).
_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange",
                        "linspace", "logspace", "eye", "empty_strided", "scalar_tensor"})


def _inputs(source: Any, lean: bool, limit: int | None = None) -> list[Any]:
    """The example inputs on the CPU; with ``lean`` (they do not fit the budget) the large ones on meta
    (:class:`_Lean`; the random stream then differs from the validation's, which cannot run whole)."""
    if not lean:
        return source.inputs("cpu")
    try:
        with torch.device("cpu"), _Lean(limit):
            xs = list(source.inputs_factory())
    except Exception:
        return source.inputs("cpu")
    xs = source.traced_numbers(xs)  # the Python numbers the program is traced with
    dt = getattr(source, "dtype", None)
    return [x.to(dt) if dt is not None and isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]


def _run(source: Any, routing: Routing, device: str, seed: int, lean: bool = False, wide: int = 0,
         cap: int | None = None) -> Plan:
    """One values pass (module docstring). On meta, ``wide`` bytes of inputs past ``SMALL_FLOAT_INPUT``
    (smallest first) have known values too, and every tensor of at most ``2 * wide`` bytes gets its value
    where its inputs have theirs (not only the ``small`` ones). ``cap``: a tensor past these bytes raises
    ``TooLarge``."""
    plan = Plan(routing, device, wide=wide > 0)
    values = _Values(on_cpu=device == "cpu", limit=2 * wide if wide else None, cap=cap)
    torch.manual_seed(seed)
    model = source.model(device)
    torch.manual_seed(seed + 1)
    cpu_inputs = _inputs(source, lean and device == "meta", values.limit)
    widened = []
    if device == "meta":
        inputs = []
        room = wide
        for x in cpu_inputs:
            if isinstance(x, torch.Tensor):
                m = torch.empty_like(x, device="meta")
                small = x.numel() <= SMALL_FLOAT_INPUT if x.is_floating_point() else is_small(x)
                if small and x.device.type != "meta":
                    values.known[m] = x
                inputs.append(m)
            else:
                inputs.append(x)
        for x, m in sorted(((x, m) for x, m in zip(cpu_inputs, inputs, strict=True) if isinstance(x, torch.Tensor)
                            and x.device.type != "meta" and m not in values.known),
                           key=lambda xm: xm[0].nbytes):
            if x.nbytes <= room:
                values.known[m], room = x, room - x.nbytes
                widened.append(m)
    else:
        inputs = cpu_inputs
    _label_model(values, model, inputs)
    for m in widened:
        values.origin[m] = values.origin[m] | {WIDE}
    from .capture import numbers_on_cpu  # (capture imports this module)
    from .eager import no_dropout

    # numbers made into tensors on meta keep their values, as in the export (torch.tensor(448.0, device=x.device))
    with torch.no_grad(), no_dropout(), CpuNvfp4(), _Tracker(values, plan, _chooser(routing, plan)), \
            _Decide(plan, values), torch.device(device), numbers_on_cpu():
        model(*inputs)
    used = set().union(*(d.routers for d in plan.decisions)) if plan.decisions else set()
    plan.routers = {i: r for i, r in plan.routers.items() if i in used}
    return plan


def _cpu_bytes(source: Any) -> int:
    model = source.model("meta")
    n = sum(p.numel() * p.element_size() for p in itertools.chain(model.parameters(), model.buffers()))
    n += sum(x.numel() * x.element_size() for x in source.inputs("meta") if isinstance(x, torch.Tensor))
    return int(n)


def specialise(source: Any, routing: Routing, *, budget: int, seed: int = 0) -> Plan:
    """The decisions of ``source``'s data-dependent calls (see the module docstring).

    Runs on meta when the routing is synthetic (only small values are computed, on the CPU), on the
    CPU when it is ``observed`` or the meta pass meets a decision on values it does not know. Where the
    model is too large for the CPU run (``budget``), the meta pass is tried once more knowing the inputs
    that fit half the budget too and computing tensors up to the budget each (``wide``): SOL-ExecBench
    Quant/008 quantises its activations (``if global_encode_scale == 0.0``, from their amax) beside a
    2.5 GB embedding table; L2/061's ``one_hot`` of 39k tokens' top-10 of 512 experts is 1.6 GB. So is a
    CPU run that makes a tensor past the budget (Quant/031's attention scores): it stops there.
    """
    need: NeedValues | None = None
    size = _cpu_bytes(source)
    if routing.forced:
        try:
            return _run(source, routing, "meta", seed, lean=size > budget)
        except NeedValues as e:
            need = e
    if size * 2 > budget:  # too large to run on the CPU: the inputs that fit, known on meta
        if (plan := _wide(source, routing, seed, budget, lean=size > budget)) is not None:
            return plan
        what = need.op if need else "the observed routing"
        where = f" ({need.where})" if need and need.where else ""
        frm = ", ".join(sorted(need.origin))[:200] if need and need.origin else "the model's weights"
        raise CaptureError(f"{source.name}: value-specialised capture: {what}{where} needs the values of a tensor "
                           f"computed from {frm}; computing them runs the model on the CPU, which needs at least "
                           f"{size * 2 / 2**30:.2f} GiB (weights and inputs, twice) over --validate-budget "
                           f"{budget / 2**30:.2f} GiB")
    try:
        return _run(source, routing, "cpu", seed, cap=budget)
    except CaptureError:
        raise
    except TooLarge as e:  # weights and inputs fit, a tensor the model makes does not (attention scores)
        if (plan := _wide(source, routing, seed, budget, lean=False)) is not None:
            return plan
        where = f" at {e.where}" if e.where else ""
        raise CaptureError(f"{source.name}: value-specialised capture: running the model on the CPU makes a tensor "
                           f"of {e.nbytes / 2**30:.2f} GiB ({e.op}{where}), over --validate-budget "
                           f"{budget / 2**30:.2f} GiB") from e
    except NeedValues as e:  # cannot happen on the CPU; kept for a clear message
        raise CaptureError(f"{source.name}: value-specialised capture: {e.op} needs values that are unknown") from e
    except Exception as e:
        raise CaptureError(f"{source.name}: value-specialised capture: running the model on the CPU raised "
                           f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}") from e


def _wide(source: Any, routing: Routing, seed: int, budget: int, lean: bool) -> Plan | None:
    """The wide meta pass (:func:`specialise`) under a synthetic routing, or None where it does not decide."""
    if not routing.forced:
        return None
    try:
        return _run(source, routing, "meta", seed, lean=lean, wide=budget // 2)
    except NeedValues:
        return None


def replaying(model: torch.nn.Module, plan: Plan) -> torch.nn.Module:
    """``model`` with its forward answering data-dependent calls from ``plan`` (for ``torch.export``;
    the instance's own forward is wrapped, so parameter names stay the model's)."""
    forward = model.forward

    def replay_forward(*args: Any, **kwargs: Any) -> Any:
        mode = _Decide(plan, None)
        with mode:
            out = forward(*args, **kwargs)
        mode.skip_empty_lists()
        if mode.next != len(plan.decisions):
            raise CaptureError(f"value-specialised capture: the export made {mode.next} of the "
                               f"{len(plan.decisions)} data-dependent calls of the values pass")
        return out

    model.forward = replay_forward
    return model


class Forcing(TorchDispatchMode):
    """Makes an eager run's router ``topk`` calls (by ordinal) return the plan's forced choice."""

    def __init__(self, tables: dict[int, np.ndarray]):
        super().__init__()
        self.tables = tables
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is aten.topk.default:
            i = self.calls
            self.calls += 1
            if i in self.tables:
                x, _, dim, _, _ = _topk_args(args, kwargs)
                return forced_topk(x, dim, self.tables[i])
        return func(*args, **kwargs)


@contextmanager
def forcing(plan: Plan | None) -> Iterator[None]:
    """Run eager code with ``plan``'s forced router choices (no-op without a plan or forced routers)."""
    tables = plan.forced_tables() if plan is not None else {}
    if not tables:
        yield
        return
    with Forcing(tables):
        yield


# --------------------------------------------------------------------------- what the file says
def _short(values: list[Any], limit: int = 64) -> tuple:
    flat: list[Any] = []
    for v in values:
        if isinstance(v, np.ndarray):
            flat.append(int(v.shape[0]) if v.ndim else v.item())
        elif isinstance(v, (list, tuple)):
            flat.append(len(v))
        elif isinstance(v, (bool, int, float)):
            flat.append(v)
        else:
            flat.append(str(v))
    return tuple(flat[:limit])


def assumptions(plan: Plan) -> tuple[Assumption, ...]:
    """The ``specialised`` and ``routing`` assumptions of a plan, for the graph's ``assumptions``."""
    out: list[Assumption] = []
    sites: dict[tuple[str, str | None], list[Decision]] = {}
    for d in plan.decisions:
        sites.setdefault((d.op, d.where), []).append(d)
    source = "the routing model's choice and small inputs (meta pass)" if plan.device == "meta" else \
        "the model run on the CPU on its example inputs (seeded weights)"
    if plan.wide:
        source = ("the routing model's choice and the example inputs that fit half the validation budget (meta "
                  "pass; the model is too large to run on the CPU)")
    for (op, where), ds in sites.items():
        what = {"index": "rows of the index", "bincount": "lengths", "list": "lengths"}.get(ds[0].kind, "values")
        out.append(Assumption("specialised", f"{op} at {where or 'unknown place'}",
                              f"{len(ds)} call(s) answered from values computed from {source}; {what} fixed "
                              "as listed (first 64)",
                              (("calls", len(ds)), (what.replace(" ", "_"), _short([d.value for d in ds])))))
    for r in plan.routers.values():
        per = per_expert_counts(r.table, r.experts)
        distinct = sum(1 for c in per if c)
        mode = str(plan.routing) if r.forced else "observed"
        detail = (f"{mode} routing: top-{r.k} of {r.experts} experts for {r.tokens} tokens; expert work and weight "
                  f"bytes follow tokens_per_expert")
        vals: list[tuple[str, Any]] = [("mode", mode), ("experts", r.experts), ("k", r.k), ("tokens", r.tokens),
                                       ("tokens_per_expert", tuple(int(c) for c in per)),
                                       ("distinct_experts", distinct),
                                       ("expected_distinct_uniform",
                                        round(expected_distinct(r.tokens, r.experts, r.k), 3))]
        out.append(Assumption("routing", f"aten.topk call {r.ordinal} at {r.where or 'unknown place'}", detail,
                              tuple(vals)))
    return tuple(out)


def needs_values(e: BaseException) -> bool:
    """Whether an export failure is a data-dependent guard or shape that specialisation can fix."""
    text = f"{type(e).__name__}: {e}"
    return any(s in text for s in ("DataDependent", "data-dependent", "data dependent", "unbacked",
                                   "Could not guard", "cannot be called on meta", "Cannot copy out of meta",
                                   "GuardOnDataDependent", "Could not extract specialized integer",
                                   "numpy() is not supported", "Cannot access data pointer",
                                   "does not have a value", "item() on"))
