"""Decide how a graph is sharded: TP splits, SP and EP node sets, pipeline stages, microbatches.

:func:`plan` returns a :class:`Plan`: the per-chip graph (ranks renamed by :mod:`.canon`, the
microbatch and TP splits applied), which nodes run sequence- or expert-parallel and with which
extra resizes, the pipeline stages, and every decision that changed a number, in words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from solar_io.format.validate import validate
from solar_io.graph import WHOLE_TENSOR_KINDS, Graph

from .canon import canonical
from .layout import Layout, ParallelError
from .ranks import Constraints
from .rules import Linear, gradients, layer_cuts, linears, phase, reduced_ranks, touched_ranks
from .shard import consumers, producers, resize, subgraph


@dataclass(frozen=True)
class Plan:
    """How one replica's graph runs on its chips (see the module docstring)."""

    layout: Layout
    microbatches: int
    graph: Graph  # per chip, per microbatch: canonical ranks, batch / microbatches, TP ranks split
    tp_splits: dict[str, int]
    column: tuple[str, ...]  # column-parallel linear nodes
    row: tuple[str, ...]  # row-parallel linear nodes (their outputs are partial sums)
    partial: tuple[str, ...]  # nodes whose output is a partial sum over the TP group
    replicated: tuple[tuple[str, str], ...]  # (linear node, why it is not sharded)
    sp_rank: str | None
    sp_nodes: frozenset[str]
    ep_rank: str | None
    ep_tokens: str | None
    ep_nodes: frozenset[str]
    stages: tuple[tuple[str, ...], ...]  # node names of each pipeline stage
    gradients: tuple[str, ...]
    training: bool
    notes: tuple[str, ...] = field(default=())
    # experts written as separate modules (:mod:`.experts`): the others' nodes leave the chip
    ep_dropped: frozenset[str] = frozenset()
    ep_factors: dict[str, Fraction] = field(default_factory=dict)
    ep_collectives: tuple = ()

    def segments(self, stage: int) -> list[tuple[str, frozenset[str], dict[str, Fraction]]]:
        """(label, nodes, extra rank resizes) of the parts of ``stage`` that one chip runs: the TP part,
        the sequence-parallel part (sequence rank / tp) and the expert part (experts / ep, tokens x ep)."""
        nodes = set(self.stages[stage]) - self.ep_dropped
        sp = nodes & self.sp_nodes
        ep = nodes & self.ep_nodes - sp
        rest = nodes - sp - ep
        out = []
        if rest:
            out.append(("tensor-parallel" if self.tp_splits else "replicated", frozenset(rest), {}))
        if sp and self.sp_rank is not None:
            out.append(("sequence-parallel", frozenset(sp), {self.sp_rank: Fraction(1, self.layout.tp)}))
        if ep and self.ep_rank is not None:
            f = {self.ep_rank: Fraction(1, self.layout.ep)}
            if self.ep_tokens is not None:
                f[self.ep_tokens] = Fraction(self.layout.ep)
            out.append(("expert-parallel", frozenset(ep), f))
        elif ep and self.ep_factors:
            out.append(("expert-parallel", frozenset(ep), dict(self.ep_factors)))
        return out


def _batch_rank(g: Graph) -> str | None:
    """The first rank of the first graph input that is an activation (not a weight or constant)."""
    for t in g.tensors:
        if t.role == "input" and t.ranks:
            return t.ranks[0]
    return None


def _tp(g: Graph, cons: Constraints, lins: list[Linear], tp: int) -> tuple[dict[str, int], list[str]]:
    """TP splits: each linear's column ranks are tried in graph order; a split is kept when the ranks
    it forces reach the contracted ranks of another linear (a column -> row pair)."""
    known: dict[str, int] = {}
    why: list[str] = []
    if tp == 1:
        return known, why
    def split(x: Linear, ranks: tuple[str, ...], into: dict[str, int]) -> bool:
        return any(into.get(k, 1) > 1 for k in ranks)

    for a in lins:
        if split(a, a.contracted, known) or split(a, a.column, known):
            continue  # already row- or column-parallel
        for r in a.column:
            trial, err = cons.solve({r: tp}, known)
            if err is not None:
                why.append(f"{a.node}: splitting its output rank {r} {tp} ways fails: {err}")
                continue
            both = [b.node for b in lins if split(b, b.column, trial) and split(b, b.contracted, trial)]
            if both:
                why.append(f"{a.node}: splitting its output rank {r} would split {both[0]} both by rows and columns")
                continue
            rows = [b.node for b in lins if b is not a and split(b, b.contracted, trial)
                    and not split(b, b.contracted, known)]
            if rows:
                known = trial
                break
    # a linear no later linear contracts (the LM head) is column-parallel alone when what its split forces
    # reaches no other linear: its output stays split (Megatron's vocabulary-parallel output layer)
    for a in lins:
        if split(a, a.contracted, known) or split(a, a.column, known):
            continue
        for r in a.column:
            trial, err = cons.solve({r: tp}, known)
            if err is not None:
                continue
            new = {k for k in trial if k not in known}
            if not any(b is not a and new & {*b.column, *b.contracted, *b.expert} for b in lins) \
                    and not new & set(a.contracted):
                known = trial
                why.append(f"{a.node}: column-parallel alone (no later linear contracts {r}); its output stays split")
                break
    return known, why


def _stages(g: Graph, pp: int, times: dict[str, float] | None) -> tuple[tuple[str, ...], ...]:
    names = [n.name for n in g.nodes]
    if pp == 1:
        return (tuple(names),)
    cuts = layer_cuts(g)
    if len(cuts) < pp - 1:
        raise ParallelError(f"--parallel pp={pp}: the graph has {len(cuts)} layer boundaries (cuts where one "
                            f"activation, no wider than most such cuts, crosses), it needs {pp - 1}")
    w = [times.get(n, 0.0) if times else 1.0 for n in names]
    prefix = [0.0]
    for x in w:
        prefix.append(prefix[-1] + x)
    points = [c[0] + 1 for c in cuts]  # a stage starts at these node indices
    # choose pp-1 of the points minimising the slowest stage (exact dynamic programme)
    big = float("inf")
    k_max, m = pp - 1, len(points)
    best = [[big] * (m + 1) for _ in range(k_max + 1)]
    back = [[-1] * (m + 1) for _ in range(k_max + 1)]
    for j in range(m):
        best[1][j] = prefix[points[j]]
    for k in range(2, k_max + 1):
        for j in range(m):
            for i in range(j):
                v = max(best[k - 1][i], prefix[points[j]] - prefix[points[i]])
                if v < best[k][j]:
                    best[k][j], back[k][j] = v, i
    j = min(range(m), key=lambda j: max(best[k_max][j], prefix[-1] - prefix[points[j]]))
    chosen = []
    k = k_max
    while k >= 1 and j >= 0:
        chosen.append(points[j])
        j = back[k][j]
        k -= 1
    bounds = [0, *sorted(chosen), len(names)]
    return tuple(tuple(names[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))


def _training_stages(g: Graph, pp: int, times: dict[str, float] | None) -> tuple[tuple[str, ...], ...]:
    """Stages of a training graph: the forward (and loss) nodes cut as :func:`_stages` cuts a forward
    graph. A backward node that reads forward tensors (saved activations, weights) runs on the last
    stage that touches them (a stage's input activation is saved where it is read); one that reads
    only gradients on the earliest stage that made them (a gradient flows back); an optimizer node
    on the stage of its weight."""
    fwd = [n.name for n in g.nodes if phase(n) not in ("backward", "optimizer")]
    stage_of: dict[str, int] = {}
    for i, names in enumerate(_stages(subgraph(g, fwd, f"{g.name or 'graph'}.forward"), pp, times)):
        stage_of.update((n, i) for n in names)
    forward = set(stage_of)
    made_by = producers(g)
    touched: dict[str, int] = {}  # forward tensor -> the last forward stage that reads or writes it
    for n in g.nodes:
        if n.name in forward:
            for a in (*n.inputs, *n.outputs):
                touched[a.tensor] = max(touched.get(a.tensor, 0), stage_of[n.name])
    for n in g.nodes:
        if n.name in forward:
            continue
        reads = [touched[a.tensor] for a in n.inputs
                 if a.tensor in touched and g.tensor_map[a.tensor].role != "constant"]
        if phase(n) == "optimizer":
            reads = [touched[a.tensor] for a in n.inputs if g.tensor_map[a.tensor].role == "weight"
                     and a.tensor in touched] or reads
        if reads:
            stage_of[n.name] = max(reads)
        else:
            made = [stage_of[made_by[a.tensor]] for a in n.inputs if made_by.get(a.tensor) in stage_of]
            stage_of[n.name] = min(made) if made else pp - 1
    return tuple(tuple(n.name for n in g.nodes if stage_of[n.name] == i) for i in range(pp))


def _sp(g: Graph, layout: Layout, lins: list[Linear], split: dict[str, int]
        ) -> tuple[str | None, frozenset[str], str | None]:
    if not layout.sp:
        return None, frozenset(), None
    if not lins:
        return None, frozenset(), "sp: no linear layer in the graph, so no token ranks to split"
    tp = layout.tp
    token = [r for r in lins[0].tokens if g.rank_sizes[r] % tp == 0 and g.rank_sizes[r] > 1]
    if not token:
        return None, frozenset(), (f"sp: no token rank of {lins[0].activation} ({', '.join(lins[0].tokens)}) is "
                                   f"divisible by tp={tp}; norms stay replicated")
    s = token[-1]
    linear_nodes = {x.node for x in lins}
    tmap = g.tensor_map
    nodes = set()
    for n in g.nodes:
        if n.name in linear_nodes or n.kind in WHOLE_TENSOR_KINDS:
            continue
        ranks = touched_ranks(g, n)
        if any(split.get(r, 1) > 1 for r in ranks) or s in reduced_ranks(g, n):
            continue
        data = [t for t in dict.fromkeys(a.tensor for a in (*n.inputs, *n.outputs))
                if tmap[t].role not in ("weight", "constant")]
        if data and all(s in tmap[t].ranks for t in data):
            nodes.add(n.name)
    return s, frozenset(nodes), None


def _ep(g: Graph, layout: Layout, lins: list[Linear]) -> tuple[str | None, str | None, frozenset[str], str | None]:
    if layout.ep == 1:
        return None, None, frozenset(), None
    experts = [x for x in lins if x.expert]
    if not experts:
        return None, None, frozenset(), ("ep: no linear has an expert rank (a weight rank its activation and "
                                         "output share: batched expert weights w[X, D, F]); experts written as "
                                         "separate modules (a loop over nn.Linear experts) stay replicated, so a "
                                         "run that spreads them can be faster than this bound")
    x_rank = experts[0].expert[0]
    if g.rank_sizes[x_rank] % layout.ep:
        raise ParallelError(f"--parallel ep={layout.ep}: the expert rank {x_rank} has {g.rank_sizes[x_rank]} experts, "
                            "not divisible")
    # every linear whose weight holds the expert rank runs per expert (a dense first layer x[T, D] w1[X, D, F]
    # has it as an output rank only)
    ex = [x for x in lins if x_rank in (*x.expert, *x.column, *x.contracted)]
    tokens = ex[0].tokens[0] if ex[0].tokens else None
    # the expert part: nodes between expert linears (reached from one and reaching one), all over x_rank
    index = {n.name: i for i, n in enumerate(g.nodes)}
    made_by, readers = producers(g), consumers(g)
    first, last = min(index[x.node] for x in ex), max(index[x.node] for x in ex)
    down: set[str] = {x.node for x in ex}
    for n in g.nodes[first:last + 1]:
        if n.name in down:
            continue
        if x_rank in n.space or x_rank in touched_ranks(g, n):
            ins = {made_by.get(a.tensor) for a in n.inputs}
            if ins & down:
                down.add(n.name)
    up: set[str] = {x.node for x in ex}
    for n in reversed(g.nodes[first:last + 1]):
        outs = {r for a in n.outputs for r in readers.get(a.tensor, ())}
        if outs & up:
            up.add(n.name)
    return x_rank, tokens, frozenset(down & up), None


def plan(g: Graph, layout: Layout, microbatches: int = 1, node_times: dict[str, float] | None = None) -> Plan:
    """The sharding of ``g`` (one data-parallel replica's step) under ``layout`` (see the module docstring).

    ``node_times``: seconds per node name on one chip, to balance pipeline stages (equal weights if None).
    """
    if microbatches < 1:
        raise ParallelError(f"--microbatches: must be >= 1, got {microbatches}")
    notes: list[str] = []
    c = canonical(g)
    if microbatches > 1:
        b = _batch_rank(c)
        if b is None or c.rank_sizes[b] % microbatches:
            size = c.rank_sizes.get(b) if b else None
            raise ParallelError(f"--microbatches {microbatches}: the batch rank ({b}, size {size}: the first rank of "
                                "the first graph input) is not divisible")
        c = resize(c, {b: Fraction(1, microbatches)}, "--microbatches")
        notes.append(f"microbatches: {microbatches}, splitting the batch rank {b} (the first rank of the first graph "
                     f"input) to {c.rank_sizes[b]}")
    training = any(phase(n) == "backward" for n in c.nodes)
    if training and microbatches > 1:
        notes.append(f"microbatches (training): forward and backward run per microbatch (batch / {microbatches}); "
                     "the weight gradients accumulate over the microbatches and the optimizer runs once per step "
                     "(sol.py: gradient accumulation)")
    lins = linears(c)
    cons = Constraints(c)
    split, why = _tp(c, cons, lins, layout.tp)
    per_chip = resize(c, {r: Fraction(1, s) for r, s in split.items()}, "--parallel tp")
    issues = [i for i in validate(per_chip) if i.severity == "error"]
    if issues:  # a rule forced an inconsistent split: say so rather than price a wrong graph
        raise ParallelError(f"--parallel tp={layout.tp}: the sharded graph is not consistent "
                            f"({issues[0].format(g.name or 'graph')}); this graph's layers cannot be split so")
    column = tuple(x.node for x in lins if any(split.get(r, 1) > 1 for r in x.column))
    row = tuple(x.node for x in lins if any(split.get(r, 1) > 1 for r in x.contracted))
    partial = tuple(n.name for n in c.nodes if any(split.get(r, 1) > 1 for r in reduced_ranks(c, n)))
    sharded = set(column) | set(row)
    replicated = []
    if layout.tp > 1:
        for x in lins:
            if x.node not in sharded and not x.expert:
                reason = next((w.split(": ", 1)[1] for w in why if w.startswith(f"{x.node}:")),
                              "no column -> row pair reaches it")
                replicated.append((x.node, reason))
        alone = [w.split(":", 1)[0] for w in why if "column-parallel alone" in w]
        if alone:
            notes.append(f"tp: {', '.join(alone[:4])}{' ...' if len(alone) > 4 else ''} column-parallel alone (no "
                         "later linear contracts their output rank: the LM head splits the vocabulary); their outputs "
                         "stay split over the TP group")
        if split:
            shown = [f"{r}/{s}" for r, s in split.items()]
            notes.append(f"tp: {len(shown)} ranks split ({', '.join(shown[:6])}{', ...' if len(shown) > 6 else ''}); "
                         f"Megatron: {len(column)} column-parallel and {len(row)} row-parallel linears")
        else:
            notes.append(f"tp={layout.tp}: no column -> row pair of linears found; every linear is replicated")
    sp_rank, sp_nodes, sp_note = _sp(per_chip, layout, linears(per_chip), split)
    if sp_note:
        notes.append(sp_note)
    elif sp_rank is not None:
        notes.append(f"sp: {len(sp_nodes)} nodes outside the TP regions (norms, residual adds) split the token "
                     f"rank {sp_rank} {layout.tp} ways; TP all-reduces into them become reduce-scatters and "
                     "all-gathers feed the TP regions")
    ep_rank, ep_tokens, ep_nodes, ep_note = _ep(per_chip, layout, linears(per_chip))
    loop = None
    if ep_note and ep_note.startswith("ep: no") and not training:
        from .experts import loop_experts

        loop = loop_experts(per_chip, layout.ep, linears(per_chip))
    if loop is not None:
        ep_nodes = loop.kept
        notes.append(loop.note)
    elif ep_note:
        notes.append(ep_note)
    elif ep_rank is not None:
        notes.append(f"ep: the expert rank {ep_rank} is split {layout.ep} ways; each chip runs its "
                     f"{per_chip.rank_sizes[ep_rank] // layout.ep} experts on the tokens of {layout.ep} data-parallel "
                     f"ranks ({ep_tokens} x {layout.ep}; balanced routing as the graph fixes it)")
    if layout.ep > 1 and not layout.dp_given:
        notes.append(f"dp: not given, taken as ep={layout.ep} (experts are spread over data-parallel ranks)")
    if training and layout.pp > 1:
        stages = _training_stages(per_chip, layout.pp, node_times)
        notes.append("pp (training): the forward is cut into stages; a backward node runs on the last stage that "
                     "touches the forward tensors it reads (its layer's saved activations and weights), one reading "
                     "only gradients on the earliest stage that made them, an optimizer node with its weight")
    else:
        stages = _stages(per_chip, layout.pp, node_times)
    grads = tuple(gradients(per_chip)) if training else ()
    if layout.dp > 1 and training and not grads:
        notes.append("dp: no weight gradient found (backward-phase outputs shaped like a weight): no all-reduce")
    extra = {} if loop is None else {"ep_dropped": loop.dropped, "ep_factors": loop.factors,
                                     "ep_collectives": loop.collectives}
    return Plan(layout, microbatches, per_chip, split, column, row, partial, tuple(replicated), sp_rank, sp_nodes,
                ep_rank, ep_tokens, ep_nodes, stages, grads, training, tuple(notes), **extra)


def stage_graph(p: Plan, stage: int, label: str, nodes: frozenset[str], factors: dict[str, Fraction]) -> Graph:
    """The graph one chip runs for a segment of a stage, resized (checked: a resize the rules got wrong
    is an error naming the part, never a wrong count)."""
    g = resize(subgraph(p.graph, nodes, label), factors, f"--parallel ({label})")
    if factors:
        issues = [i for i in validate(g) if i.severity == "error"]
        if issues:
            raise ParallelError(f"--parallel {p.layout}: the {label} part is not consistent once resized "
                                f"({issues[0].format(label)})")
    return g


__all__ = ["Plan", "plan", "stage_graph"]
