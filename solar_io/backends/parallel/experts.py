"""Expert parallelism over experts written as separate modules (a loop over ``nn.Linear`` experts, as
Mixtral's and DeepSeek's MoE blocks are in transformers).

An *expert* is found from the structure: a column -> row pair of linears (``w1``/``w3`` then ``w2``)
with its own weights, and its *region*, the nodes that lead to the row linear from the pair's
activation. Pairs whose activations come from the same token tensor (directly, or through a gather
of the routed tokens) and whose weights have the same shapes are the experts of one MoE layer when
there are at least two of them; a lone pair is an ordinary MLP.

Under ``ep=n`` chip ``c`` holds experts ``c, c + n, c + 2n, ...`` of every layer and runs them on the
tokens the ``n`` data-parallel replicas route to them: each kept region's token rank grows ``n``
times, the other experts' regions leave the chip. The busiest chip (most expert MACs) is the one
bounded. Tokens reach the experts by an all-to-all of the gathered rows (or, when every expert
reads every token, an all-gather of them) and come back by an all-to-all of the experts' outputs.

Training graphs (whose backward would have to follow its expert) are not split this way.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from solar_io.affine import Indirect
from solar_io.graph import Graph
from solar_io.metrics import node_metrics, tensor_bytes

from .collectives import Collective
from .rules import Linear, pairs
from .shard import consumers, producers


@dataclass(frozen=True)
class LoopExperts:
    """The chip's experts (``kept`` nodes, resized by ``factors``), the others (``dropped``), the
    collectives they need per microbatch and a sentence for the report."""

    kept: frozenset[str]
    dropped: frozenset[str]
    factors: dict[str, Fraction]
    collectives: tuple[Collective, ...]
    note: str


def _ancestors(g: Graph, node: str, made_by: dict[str, str]) -> set[str]:
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(made_by[a.tensor] for a in g.node_map[n].inputs if a.tensor in made_by)
    return seen


def _descendants(g: Graph, tensor: str, readers: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(readers.get(tensor, ()))
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for a in g.node_map[n].outputs:
            todo.extend(readers.get(a.tensor, ()))
    return seen


def _source(g: Graph, tensor: str, made_by: dict[str, str]) -> tuple[str, bool]:
    """(the token tensor ``tensor`` is moved or gathered from, whether a gather selected rows of it)."""
    gathered = False
    for _ in range(64):
        p = made_by.get(tensor)
        if p is None or g.node_map[p].kind != "data_movement" or not g.node_map[p].inputs:
            return tensor, gathered
        n = g.node_map[p]
        gathered = gathered or any(type(e) is Indirect for a in n.inputs for e in a.index or ())
        tensor = n.inputs[0].tensor
    return tensor, gathered


def loop_experts(g: Graph, ep: int, lins: list[Linear]) -> LoopExperts | None:
    """The expert-parallel split of ``g``'s expert modules over ``ep`` chips, or None if it has none."""
    made_by, readers = producers(g), consumers(g)
    groups: dict[tuple, list[tuple[Linear, Linear, set[str], str, bool]]] = {}
    for _, a, b in pairs(lins):
        src, gathered = _source(g, a.activation, made_by)
        region = _ancestors(g, b.node, made_by) & (_descendants(g, a.activation, readers) | {a.node})
        key = (src, g.shape(a.weight), g.shape(b.weight))
        groups.setdefault(key, []).append((a, b, region, a.activation, gathered))
    layers = [v for v in groups.values() if len(v) >= 2]
    if not layers:
        return None
    kept: set[str] = set()
    dropped: set[str] = set()
    factors: dict[str, Fraction] = {}
    out: list[Collective] = []
    count = 0
    for experts in layers:
        if len(experts) % ep:
            continue
        count += len(experts)
        macs = [sum(node_metrics(g, g.node_map[n]).macs for n in region) for _, _, region, _, _ in experts]
        chips = [list(range(c, len(experts), ep)) for c in range(ep)]
        busiest = max(chips, key=lambda idx: sum(macs[i] for i in idx))
        for i, (a, _, region, _, _) in enumerate(experts):
            (kept if i in busiest else dropped).update(region)
            if i in busiest and a.tokens:
                factors[a.tokens[0]] = Fraction(ep)
        acts = list(dict.fromkeys(act for _, _, _, act, _ in experts))
        outs = [g.node_map[b.node].outputs[0].tensor for _, b, _, _, _ in experts]
        if experts[0][4]:  # routed rows gathered per expert: sent to the experts' chips and back
            nb = sum(tensor_bytes(g, g.tensor_map[t]) for t in acts)
            out.append(Collective("all-to-all", "ep", f"{len(acts)} expert inputs", nb,
                                  "dispatch: each replica's routed tokens to their experts' chips"))
        else:  # every expert reads every token: each chip needs the tokens of all ep replicas
            nb = ep * sum(tensor_bytes(g, g.tensor_map[t]) for t in acts)
            out.append(Collective("all-gather", "ep", ", ".join(acts), nb,
                                  f"every expert reads every token: the tokens of all {ep} EP ranks"))
        nb = sum(tensor_bytes(g, g.tensor_map[t]) for t in outs)
        out.append(Collective("all-to-all", "ep", f"{len(outs)} expert outputs", nb,
                              "combine: the experts' outputs back to their tokens' chips"))
    if not count:
        return None
    note = (f"ep: {count} experts written as separate modules in {len(layers)} layer(s) (column -> row pairs of the "
            f"same shapes reading the same tokens); the busiest chip holds every {ep}th expert of each layer and runs "
            f"it on the tokens of {ep} data-parallel replicas (token ranks x {ep}); the other experts leave the chip")
    return LoopExperts(frozenset(kept), frozenset(dropped), factors, tuple(out), note)


__all__ = ["LoopExperts", "loop_experts"]
