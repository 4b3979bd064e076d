"""Shipped hardware specs skip the run-time JSON Schema pass only while byte-identical to a spec that passed
it (solar_io/hardware/checked.py, issue 19); every other spec is checked in full."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from solar_io.hardware import HardwareSpecError, checked, load_spec
from solar_io.hardware.catalog import _documents
from solar_io.hardware.read import _safe_load, load_spec_file, spec_from_dict

REPO = Path(__file__).resolve().parents[2]
REGENERATE = 'python -c "from solar_io.hardware import checked; checked.main()"'


def test_the_record_is_current() -> None:
    """The record equals a fresh one (which checks every shipped spec against the schema in full)."""
    text = (REPO / "hardware" / checked.RECORD).read_text(encoding="utf-8")
    assert text == checked.record(), f"hardware/{checked.RECORD} is stale: run {REGENERATE}"


def test_a_recorded_spec_is_the_spec_a_full_check_builds() -> None:
    for origin, text in _documents():
        assert checked.schema_checked(text), origin
        assert load_spec_file(origin, text=text) == spec_from_dict(_safe_load(text, origin), origin, schema=True)


def test_a_shipped_spec_loads_without_jsonschema() -> None:
    code = ("import sys; from solar_io.hardware import load_spec; s = load_spec('h100-sxm'); "
            "print(s.name, 'jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.split() == ["h100-sxm", "False"]


def test_any_other_text_gets_the_schema_pass(tmp_path: Path) -> None:
    text = (REPO / "hardware" / "h100-sxm.yaml").read_text(encoding="utf-8")
    copy = tmp_path / "mine.yaml"
    copy.write_text(text, encoding="utf-8")
    assert load_spec_file(copy) == load_spec("h100-sxm")  # a byte-identical copy: the same spec
    edited = tmp_path / "edited.yaml"
    edited.write_text(text + "colour: green\n", encoding="utf-8")  # only the schema forbids an unknown field
    assert not checked.schema_checked(edited.read_text(encoding="utf-8"))
    with pytest.raises(HardwareSpecError, match="edited.yaml: field .*colour"):
        load_spec_file(edited)


def test_another_schema_voids_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / "hardware" / "l4.yaml").read_text(encoding="utf-8")
    assert checked.schema_checked(text)
    checked._schema_bytes.cache_clear()
    monkeypatch.setattr(checked, "data_file", lambda *a: type("F", (), {"read_bytes": lambda self: b"{}"})())
    try:
        assert not checked.schema_checked(text)
    finally:
        monkeypatch.undo()
        checked._schema_bytes.cache_clear()
    assert checked.schema_checked(text)
