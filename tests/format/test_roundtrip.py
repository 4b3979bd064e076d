"""Canonical text: load(dump(g)) == g, dump(load(text)) == text, and both parsers agree."""

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from strategies import graphs

from solar_io import dumps, loads, validate
from solar_io.format.encode import encode
from solar_io.format.yamltext import YamlError, _fast_parse, emit, parse


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_roundtrip(g):
    assert [i for i in validate(g) if i.severity == "error"] == []
    text = dumps(g)
    assert loads(text) == g
    assert dumps(loads(text)) == text
    # The canonical text means the same to PyYAML as to our fast parser.
    assert yaml.safe_load(text) == encode(g)
    assert _fast_parse(text) == encode(g)


def test_non_canonical_text_goes_through_libyaml():
    text = "a: 1  # comment\nb: {c: [1, 2]}\n"
    assert parse(text) == {"a": 1, "b": {"c": [1, 2]}}


def test_emitter_quotes_what_yaml_would_misread():
    doc = {"s": ["yes", "no", "on", "null", "1.5", "0x10", "1:20", "2001-12-14", "~", "", "@x", "-",
                 "a: b", "#c", "x #y", "'q'", '"d"', "tab\tin", "é", "\U0001f600", "\x85", "trail "]}
    text = emit(doc)
    assert yaml.safe_load(text) == doc
    assert parse(text) == doc


def test_keys_that_yaml_reads_as_booleans_are_quoted_and_read_back_fast():
    """An attribute named ``no`` (YAML 1.1 reads a plain ``no`` as false) is written quoted, and the
    fast parser reads the quoted key as libyaml does (found by the random-graph round trip)."""
    for word in ("no", "yes", "on", "off", "null", "true"):
        text = emit({"attrs": {word: 0, "x": 1}})
        assert f'"{word}": 0' in text
        assert _fast_parse(text) == yaml.safe_load(text) == {"attrs": {word: 0, "x": 1}}


def test_repeated_lines_are_read_once_and_their_lists_are_not_shared():
    """The fast parser reads each distinct ``key: value`` line once (a layer's lines repeat in every
    layer); every mapping still gets its own list, so changing one leaves the others as written, and a
    repeated key inside one mapping is still refused (handed to libyaml, which names it)."""
    text = "a:\n  space: [B, S]\n  map: mul\n  n: 3\nb:\n  space: [B, S]\n  map: mul\n  n: 3\n"
    doc = _fast_parse(text)
    assert doc == yaml.safe_load(text) == {"a": {"space": ["B", "S"], "map": "mul", "n": 3},
                                           "b": {"space": ["B", "S"], "map": "mul", "n": 3}}
    assert doc["a"]["space"] is not doc["b"]["space"]
    doc["a"]["space"].append("D")
    assert doc["b"]["space"] == ["B", "S"]
    with pytest.raises(YamlError, match="duplicate key 'map'"):
        parse("a:\n  map: mul\n  map: mul\n")
