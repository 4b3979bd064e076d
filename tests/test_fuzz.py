"""Fuzzing the loader: random text and document mutations give a clean error or a valid graph."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graphs

from solar_io import GraphError, check_text, dumps, loads
from solar_io.errors import Issue
from solar_io.format.encode import encode
from solar_io.format.yamltext import emit

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _outcome(text: str) -> None:
    """check_text never raises; a graph comes back exactly when no error is reported."""
    g, issues = check_text(text, "fuzz.yaml")
    assert all(isinstance(i, Issue) for i in issues)
    errors = [i for i in issues if i.severity == "error"]
    assert (g is None) == bool(errors)
    for i in errors:
        line = i.format("fuzz.yaml")
        assert "\n" not in line and line.startswith("fuzz.yaml")
    if g is not None:
        assert loads(dumps(g)) == g


@FUZZ
@given(st.data(), graphs(max_nodes=4))
def test_text_mutations(data, g):
    text = dumps(g)
    edit = st.tuples(st.sampled_from(["delete", "insert", "replace", "swap", "dup"]), st.integers(0, len(text)),
                     st.text(max_size=3))
    ops = data.draw(st.lists(edit, min_size=1, max_size=4))
    for op, pos, s in ops:
        if op == "delete":
            text = text[:pos] + text[pos + 1:]
        elif op == "insert":
            text = text[:pos] + s + text[pos:]
        elif op == "replace":
            text = text[:pos] + s + text[pos + len(s):]
        else:
            lines = text.split("\n")
            i = pos % max(1, len(lines))
            j = (i + 1) % max(1, len(lines))
            if op == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines.insert(i, lines[i])
            text = "\n".join(lines)
    _outcome(text)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=False),
                    st.text(max_size=6), st.builds(list), st.builds(dict), st.builds(lambda: ["M", "Q"]),
                    st.just("A[M, K + 9]"))


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@FUZZ
@given(st.data(), graphs(max_nodes=4))
def test_document_mutations(data, g):
    doc = copy.deepcopy(encode(g))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = data.draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = data.draw(st.sampled_from(["delete", "replace", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = data.draw(_VALUES)
        elif isinstance(parent, dict):
            parent[data.draw(st.text(min_size=1, max_size=5))] = data.draw(_VALUES)
        else:
            parent.append(data.draw(_VALUES))
    _outcome(emit(doc))
    _outcome(yaml.safe_dump(doc, default_flow_style=True))


def test_known_nasty_inputs():
    for text in ["", "\n", "---\n---\n", "!!python/object:os.system {}\n", "a: !!binary aGk=\n", "? [a]\n: b\n",
                 "format: solar-io.einsum-graph\nversion: '1.0'\nnodes: !!set {a}\n", "\ufeffa: 1\n",
                 "%YAML 1.1\n---\na: 1\n",
                 "a: 2001-02-30\n", "a: 1e999999\n", "a: !!int 99999999999999999999999999999999\n"]:
        _outcome(text)
    try:
        loads("")
    except GraphError as e:
        assert "mapping" in str(e)
