"""What every frontend's training capture shares: the options, the optimizer update, phases, the record.

A training step is one graph: forward, loss, backward (the joint graph the framework's autograd
derives) and the optimizer update, each node's ``phase`` telling them apart (format 1.3). The
frontend builds the joint graph; this module adds the update through the common builder and writes
what was assumed into the graph as an ``Assumption("training", ...)``.

The update, per parameter ``w`` with gradient ``g`` (elementwise; one kernel per parameter, as a
fused or foreach optimizer runs it). ``state`` dtype = ``master_dtype`` when given, else the
parameter's dtype (PyTorch keeps ``exp_avg`` in the parameter's dtype):

- ``sgd`` (PyTorch ``SGD``, momentum 0, no weight decay): ``w' = w - lr * g``. Reads g and w,
  writes w'.
- ``adamw`` (PyTorch ``AdamW``, step ``t``, decoupled weight decay ``wd``)::

      m' = b1*m + (1-b1)*g;  v' = b2*v + (1-b2)*g*g
      w' = w*(1 - lr*wd) - (lr/(1-b1^t)) * m' / (sqrt(v')/sqrt(1-b2^t) + eps)

  Reads g, m, v, w; writes m', v', w'.
- With ``master_dtype`` (mixed precision), ``w`` is the master copy in that dtype and the
  parameter the model reads is written as ``cast(w')`` too. bf16 parameters with fp32 master
  weights and moments move, per parameter, 2 (g) + 3*4 (m, v, master read) + 3*4 (written)
  + 2 (bf16 parameter) = 28 bytes under AdamW.

>>> TrainSpec(optimizer="sgd", master_dtype="fp32").describe()
'loss sum, optimizer sgd (lr 0.001, momentum 0, no weight decay), master weights and state in fp32'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod, sqrt

from ...affine import Access
from ...graph import Assumption, Graph, Node, Producer
from ...liveness import with_live_work
from ...metrics import with_index_assumptions
from .builder import GraphBuilder, access
from .errors import CaptureError
from .validation import graph_bytes, skipped

LOSSES = ("mse", "ce", "sum")
OPTIMIZERS = ("sgd", "adamw", "none")
MASTER_DTYPES = ("fp32",)


@dataclass(frozen=True)
class TrainSpec:
    """How to capture a training step (``solar-io capture --train``)."""

    loss: str = "sum"
    optimizer: str = "adamw"
    master_dtype: str | None = None
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    step: int = 1
    recompute: bool = False  # activation checkpointing (frontends/common/recompute.py)

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise CaptureError(f"bad --loss {self.loss!r}: use {', '.join(LOSSES)}")
        if self.optimizer not in OPTIMIZERS:
            raise CaptureError(f"bad --optimizer {self.optimizer!r}: use {', '.join(OPTIMIZERS)}")
        if self.master_dtype is not None and self.master_dtype not in MASTER_DTYPES:
            raise CaptureError(f"bad --master-dtype {self.master_dtype!r}: use {', '.join(MASTER_DTYPES)}")
        if self.master_dtype is not None and self.optimizer == "none":
            raise CaptureError("--master-dtype needs an optimizer (--optimizer sgd or adamw)")

    def describe(self) -> str:
        """One sentence naming every setting that changes a number."""
        if self.optimizer == "adamw":
            opt = (f"adamw (lr {self.lr}, betas {self.betas}, eps {self.eps}, weight_decay {self.weight_decay}, "
                   f"step {self.step})")
        elif self.optimizer == "sgd":
            opt = f"sgd (lr {self.lr}, momentum 0, no weight decay)"
        else:
            opt = "none (the gradients are the graph's outputs)"
        state = f"master weights and state in {self.master_dtype}" if self.master_dtype else \
            "state in the parameter dtype"
        ckpt = ", activations recomputed in the backward between layer boundaries" if self.recompute else ""
        return f"loss {self.loss}, optimizer {opt}, {state}{ckpt}"

    def assumption(self, params: int, elements: int) -> Assumption:
        """The ``training`` assumption recording this setup for ``params`` tensors of ``elements`` in all."""
        values: list[tuple[str, object]] = [("loss", self.loss), ("optimizer", self.optimizer),
                                            ("master_dtype", self.master_dtype or "none"),
                                            ("parameters", params),
                                            ("parameter_elements", elements), ("recompute", self.recompute)]
        if self.optimizer != "none":
            values.append(("lr", self.lr))
        if self.optimizer == "adamw":
            values += [("betas", self.betas), ("eps", self.eps), ("weight_decay", self.weight_decay),
                       ("step", self.step)]
        return Assumption("training", "step", self.describe(), tuple(values))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Param:
    """A trained parameter: its graph tensor, its gradient's tensor and its label (``l1.weight``)."""

    tensor: str
    grad: str
    label: str


def emit_optimizer(b: GraphBuilder, params: list[Param], spec: TrainSpec
                   ) -> tuple[list[str], list[str], list[dict[str, str]]]:
    """Emit the update of every parameter (see the module docstring) into ``b``.

    Returns (outputs, node names, tensors): the updated tensors, which become graph outputs; the
    optimizer's nodes (their ``phase`` and ``kernel`` are set by :func:`mark_phases`); per
    parameter, its optimizer tensors by role (``exp_avg``, ``exp_avg_sq``, ``master`` read;
    ``exp_avg_new``, ``exp_avg_sq_new``, ``updated``, ``param_new`` written)."""
    outputs: list[str] = []
    tensors: list[dict[str, str]] = []
    start = len(b.nodes)
    for p in params:
        t = _update(b, p, spec)
        tensors.append(t)
        outputs += [t[k] for k in ("exp_avg_new", "exp_avg_sq_new", "updated", "param_new") if k in t]
    return outputs, [n.name for n in b.nodes[start:]], tensors


def _update(b: GraphBuilder, p: Param, spec: TrainSpec) -> dict[str, str]:
    ranks = b.ranks(p.grad)
    pdt = b.dtype(p.tensor)
    sdt = spec.master_dtype or pdt
    base = f"{spec.optimizer}:{p.label}"
    op = f"optimizer.{spec.optimizer}"

    def new(name: str, dtype: str, role: str = "intermediate") -> str:
        return b.tensor(f"{p.label}.{name}", ranks, dtype, role)

    def ew(tag: str, map_: str, *xs: str | float, dtype: str = sdt) -> str:
        out = new(tag, dtype)
        ins = []
        for x in xs:
            if isinstance(x, str):
                ins.append(access(x, ranks))
            else:
                ins.append(access(b.constant(f"{p.label}.{tag}.c", float(x), sdt), []))
        b.einsum(f"{base}.{tag}", op, ranks, ins, access(out, ranks), map_, "none",
                 attrs={"optimizer": spec.optimizer, "param": p.label})
        return out

    names: dict[str, str] = {}
    if spec.master_dtype:
        w = names["master"] = b.tensor(f"{p.label}.master", ranks, sdt, "weight")
    else:
        w = p.tensor
    g = ew("grad_cast", "identity", p.grad) if b.dtype(p.grad) != sdt else p.grad
    lr = spec.lr
    if spec.optimizer == "sgd":
        step = ew("step", "mul", g, lr)
        w_new = ew("updated", "sub", w, step)
    else:
        b1, b2 = spec.betas
        bc1, bc2 = 1 - b1 ** spec.step, 1 - b2 ** spec.step
        m = b.tensor(f"{p.label}.exp_avg", ranks, sdt, "input")
        v = b.tensor(f"{p.label}.exp_avg_sq", ranks, sdt, "input")
        m_new = ew("exp_avg_new", "add", ew("m_decay", "mul", m, b1), ew("m_grad", "mul", g, 1 - b1))
        v_new = ew("exp_avg_sq_new", "add", ew("v_decay", "mul", v, b2),
                   ew("v_grad", "mul", ew("grad_sq", "square", g), 1 - b2))
        denom = ew("denom", "add", ew("denom_scaled", "mul", ew("sqrt", "sqrt", v_new), 1 / sqrt(bc2)), spec.eps)
        step = ew("step", "mul", ew("ratio", "div", m_new, denom), lr / bc1)
        w_new = ew("updated", "sub", ew("decayed", "mul", w, 1 - lr * spec.weight_decay), step)
        names.update(exp_avg=m, exp_avg_sq=v, exp_avg_new=m_new, exp_avg_sq_new=v_new)
    names["updated"] = w_new
    if spec.master_dtype:
        names["param_new"] = ew("param_new", "identity", w_new, dtype=pdt)
    return names


def build_step(b: GraphBuilder, params: list[Param], spec: TrainSpec, loss: str, model_outputs: set[str],
               producer: Producer, name: str) -> tuple[Graph, list[dict[str, str]]]:
    """The step graph of a lowered forward + loss + backward in ``b``: the optimizer update emitted
    (unless ``spec.optimizer`` is ``none``: then the gradients are outputs), the graph built with the
    loss first among its outputs, every node's phase marked (by data flow: what ``model_outputs`` need
    is forward, what only the loss needs is loss, the optimizer's nodes, the rest backward). Returns
    the graph and each parameter's optimizer tensors (:func:`emit_optimizer`)."""
    forward = ancestors(b.nodes, model_outputs)
    loss_nodes = ancestors(b.nodes, {loss}) - forward
    opt_names: list[str] = []
    opt_tensors: list[dict[str, str]] = [{} for _ in params]
    if spec.optimizer == "none":
        outputs = [loss] + [p.grad for p in params]
    else:
        updated, opt_names, opt_tensors = emit_optimizer(b, params, spec)
        outputs = [loss] + updated
    g = b.build(outputs, name=name, producer=producer)
    g = with_index_assumptions(with_live_work(g))  # partly used results; index values the file does not hold
    return mark_phases(g, forward, loss_nodes, set(opt_names), optimizer_kernels(opt_names)), opt_tensors


def with_training_assumption(g: Graph, b: GraphBuilder, params: list[Param], spec: TrainSpec) -> Graph:
    """``g`` with the ``training`` assumption of ``spec`` over ``params`` (their count and elements)."""
    elements = sum(prod(b.shape(p.tensor)) for p in params)
    return replace(g, assumptions=g.assumptions + (spec.assumption(len(params), elements),))


def recomputed_and_unvalidated(g: Graph, spec: TrainSpec, validate: bool, budget: int) -> tuple[Graph, bool]:
    """``g`` with activation checkpointing applied when ``spec.recompute``, and whether it still needs
    its numeric check: when not (``--no-validate``, or a step too large to run whole within
    ``budget`` bytes: steps are validated whole only) its validation record says why."""
    if spec.recompute:
        from .recompute import recompute

        g, _ = recompute(g)
    if not validate:
        return replace(g, validation=skipped("not requested (--no-validate)")), False
    need = graph_bytes(g) * 2
    if need > budget:
        return replace(g, validation=skipped(
            f"the training step needs {need / 2**30:.1f} GiB to run whole (--validate-budget "
            f"{budget / 2**30:.1f} GiB); training steps are validated whole only")), False
    return g, True


def ancestors(nodes: list[Node], tensors: set[str]) -> set[str]:
    """Names of the nodes in ``nodes`` (topological order) that ``tensors`` depend on."""
    needed = set(tensors)
    found: set[str] = set()
    for n in reversed(nodes):
        if any(a.tensor in needed for a in n.outputs):
            found.add(n.name)
            needed.update(a.tensor for a in n.inputs)
    return found


def mark_phases(g: Graph, forward: set[str], loss: set[str], optimizer: set[str], kernels: dict[str, str]) -> Graph:
    """``g`` with every node's ``phase``: forward, loss or optimizer by name, backward otherwise;
    optimizer nodes get their declared ``kernel`` (one per parameter) from ``kernels``.

    A copy the builder added for an output (``<t>.out``) takes the phase of the node writing ``t``."""
    writer = {a.tensor: n.name for n in g.nodes for a in n.outputs}

    def phase(n: Node) -> str:
        name = n.name
        if n.op == "output_copy" and n.inputs and n.inputs[0].tensor in writer:
            name = writer[n.inputs[0].tensor]
        if name in optimizer:
            return "optimizer"
        if name in forward:
            return "forward"
        return "loss" if name in loss else "backward"

    nodes = tuple(replace(n, phase=phase(n), kernel=kernels.get(n.name, n.kernel)) for n in g.nodes)
    return replace(g, nodes=nodes)


def optimizer_kernels(names: list[str]) -> dict[str, str]:
    """{optimizer node: its kernel}: the node name up to its last ``.`` (``adamw:l1.weight``)."""
    return {n: n.rsplit(".", 1)[0] for n in names}


def rename_tensors(g: Graph, mapping: dict[str, str]) -> Graph:
    """``g`` with tensors renamed by ``mapping`` wherever they are named (not index tensors)."""
    if not mapping:
        return g

    def acc(a: Access) -> Access:
        return Access(mapping.get(a.tensor, a.tensor), a.index) if a.tensor in mapping else a

    tensors = tuple(replace(t, name=mapping[t.name]) if t.name in mapping else t for t in g.tensors)
    nodes = tuple(replace(n, inputs=tuple(acc(a) for a in n.inputs), outputs=tuple(acc(a) for a in n.outputs),
                          init=mapping.get(n.init, n.init) if n.init else n.init) for n in g.nodes)
    return replace(g, tensors=tensors, nodes=nodes)
