"""The dataflow checks of semantic validation (:mod:`.validate`): every tensor produced at most
once; inputs, weights and constants never produced; outputs and intermediates produced exactly once
and before they are read (nodes in topological order, a cycle named as such); intermediates read;
reduced validation ranks declared and no larger than their sizes; at least one output.
"""

from __future__ import annotations

SOURCE_ROLES = ("input", "weight", "constant")


class _DataflowChecks:
    """Dataflow checks, mixed into :class:`.validate._Validator`: they use its ``g``, ``sizes``,
    ``err`` and ``warn``."""

    # ------------------------------------------------------------------ dataflow
    def dataflow(self) -> None:
        g = self.g
        producer: dict[str, int] = {}
        for i, n in enumerate(g.nodes):
            for a in n.outputs:
                if a.tensor in producer:
                    self.err(("nodes", i), f"node {n.name}: tensor {a.tensor} is already produced by node "
                             f"{g.nodes[producer[a.tensor]].name}; every tensor is produced once")
                else:
                    producer[a.tensor] = i
        readers: dict[str, int] = {}
        late: list[tuple[int, str]] = []
        for i, n in enumerate(g.nodes):
            for a in n.inputs:
                readers[a.tensor] = readers.get(a.tensor, 0) + 1
                p = producer.get(a.tensor)
                if p is not None and p >= i:
                    late.append((i, a.tensor))
        for i, tensor in late:
            cycle = self._cycle(producer, i)
            n = g.nodes[i]
            if cycle:
                self.err(("nodes", i), f"cycle: {' -> '.join(cycle)}; the graph must be a DAG")
            elif producer[tensor] == i:
                self.err(("nodes", i), f"node {n.name} reads its own output {tensor}")
            else:
                self.err(("nodes", i), f"node {n.name} reads {tensor} before node "
                         f"{g.nodes[producer[tensor]].name} produces it; list nodes in topological order")
        for i, t in enumerate(g.tensors):
            p = producer.get(t.name)
            if t.role in SOURCE_ROLES and p is not None:
                self.err(("tensors", i, "role"), f"tensor {t.name} has role {t.role} but node "
                         f"{g.nodes[p].name} produces it; use role intermediate or output")
            elif t.role in ("output", "intermediate") and p is None:
                self.err(("tensors", i, "role"), f"tensor {t.name} has role {t.role} but no node produces it")
            elif t.role == "intermediate" and t.name not in readers:
                self.err(("tensors", i, "role"), f"intermediate tensor {t.name} is never read; make it an "
                         "output or remove it")
            elif t.role in ("input", "weight") and t.name not in readers:
                self.warn(("tensors", i), f"{t.role} tensor {t.name} is never read")
        for r, size in g.validation.reduced_ranks:
            if r not in self.sizes:
                self.err(("validation", "reduced_ranks", r), f"rank {r} is not declared in ranks")
            elif size > self.sizes[r]:
                self.err(("validation", "reduced_ranks", r), f"reduced size {size} of {r} exceeds its size "
                         f"{self.sizes[r]}")
        if not any(t.role == "output" for t in g.tensors):
            self.err(("tensors",), "the graph has no tensor with role output")

    def _cycle(self, producer: dict[str, int], start: int) -> list[str] | None:
        """Node names on a cycle through node ``start``, if there is one."""
        nodes = self.g.nodes
        stack = [(start, [nodes[start].name])]
        seen = set()
        while stack:
            i, trail = stack.pop()
            for a in nodes[i].inputs:
                p = producer.get(a.tensor)
                if p is None:
                    continue
                if p == start:
                    return trail + [nodes[start].name] if p != i else None
                if p not in seen:
                    seen.add(p)
                    stack.append((p, trail + [nodes[p].name]))
        return None
