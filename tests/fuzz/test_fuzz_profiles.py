"""Fuzzing measured-runtime profiles, `graphopt import ... --profile` (issue 15, item 1).

Seeds: a CSV and a JSON profile of the contract's example graph (ops a, b, c). Mutants: CSV
cells, rows and dialects (`mutated_csv`), JSON documents (`mutated_json`), and bytes of both.

`read_profile` + `apply_profile` must refuse a mutant with the project's one-line error, or
accept it as exactly what the file says: one entry per data row or JSON key (a duplicate or a
misspelt op is refused, never dropped), each time the finite number >= 0 the text spells, and a
graph with those runtimes that both scorers score identically. A sample goes through the CLI.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import assert_same_graph, tiny
from fuzz.harness import (
    FAST_EXAMPLES,
    SLOW_EXAMPLES,
    Defect,
    assert_scored_identically,
    fuzz_settings,
    outcome,
    record,
    run_cli,
)
from fuzz.mutators import mutated_bytes, mutated_csv, mutated_json
from graphopt.costmodels.roofline import apply_profile, read_profile
from graphopt.errors import GraphError
from graphopt.ir.io import graph_from_json, graph_to_json, write_graph

GRAPH = tiny()
CSV_ROWS = [["op", "seconds"], ["a", "0.5"], ["b", "1.25e-3"]]
JSON_DOCUMENT = {"a": 0.5, "b": 1.25e-3, "c": 0}
VOCABULARY = ("a", "b", "c", "op", "seconds", "name", "A", "a ", "aa")


def _profile(path: Path):
    profile = read_profile(path)
    return profile, apply_profile(GRAPH, profile)


def _expected_csv(text: str) -> list[tuple[str, float]] | None:
    """What an accepted CSV may hold: each data row's op and the number its cell spells.

    None when Python's own lenient reading of the text already fails (then it must be refused).
    """
    try:
        rows = [r for r in csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")) if r]
    except csv.Error:
        return None
    if rows and [c.strip().lower() for c in rows[0]] == ["op", "seconds"]:
        rows = rows[1:]
    try:
        return [(row[0], float(row[1])) for row in rows if len(row) == 2]
    except ValueError:
        return None


def _expected_json(text: str) -> list[tuple[str, float]] | None:
    try:
        pairs = json.loads(text.removeprefix("\ufeff"), object_pairs_hook=lambda p: p)
        return [(name, float(value)) for name, value in pairs]
    except (ValueError, TypeError, OverflowError, RecursionError):
        return None


def check_profile(directory: Path, suffix: str, mutant: bytes) -> None:
    path = directory / f"profile{suffix}"
    path.write_bytes(mutant)
    result = outcome(_profile, path)
    record(result)
    if not result.accepted:
        return
    profile, graph = result.value
    text = mutant.decode("utf-8")
    expected = _expected_json(text) if suffix == ".json" else _expected_csv(text)
    if expected is None or len(expected) != len(profile):
        raise Defect(f"accepted {mutant!r} as {profile}, which is not what it says")
    for name, seconds in expected:
        if profile.get(name) != seconds or not math.isfinite(seconds) or seconds < 0:
            raise Defect(f"accepted {mutant!r}: op {name!r} read as {profile.get(name)}")
    for name, seconds in profile.items():
        assert type(seconds) is float
        assert graph.op_runtime[graph.op_ids[name]] == seconds
    untouched = [j for j, name in enumerate(GRAPH.op_names) if name not in profile]
    np.testing.assert_array_equal(graph.op_runtime[untouched], GRAPH.op_runtime[untouched])
    assert_scored_identically(graph)
    assert_same_graph(graph_from_json(graph_to_json(graph)), graph)


def csv_mutants() -> st.SearchStrategy[bytes]:
    seed = b"op,seconds\na,0.5\nb,1.25e-3\n"
    as_table = mutated_csv(CSV_ROWS, VOCABULARY).map(
        lambda text: text.encode("utf-8", errors="surrogatepass")
    )
    return st.one_of(as_table, mutated_bytes(seed))


def json_mutants() -> st.SearchStrategy[bytes]:
    seed = json.dumps(JSON_DOCUMENT).encode()
    as_document = mutated_json(JSON_DOCUMENT, VOCABULARY).map(
        lambda text: text.encode("utf-8", errors="surrogatepass")
    )
    return st.one_of(as_document, mutated_bytes(seed))


@fuzz_settings(FAST_EXAMPLES)
@given(mutant=csv_mutants())
def test_csv_profile_mutants(tmp_path_factory, mutant) -> None:
    check_profile(tmp_path_factory.getbasetemp(), ".csv", mutant)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(mutant=csv_mutants())
def test_csv_profile_mutants_slow(tmp_path_factory, mutant) -> None:
    check_profile(tmp_path_factory.getbasetemp(), ".csv", mutant)


@fuzz_settings(FAST_EXAMPLES)
@given(mutant=json_mutants())
def test_json_profile_mutants(tmp_path_factory, mutant) -> None:
    check_profile(tmp_path_factory.getbasetemp(), ".json", mutant)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(mutant=json_mutants())
def test_json_profile_mutants_slow(tmp_path_factory, mutant) -> None:
    check_profile(tmp_path_factory.getbasetemp(), ".json", mutant)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("op,seconds\na,0.5\na,0.25\n", r"line 3: op 'a' is named twice"),
        ("a,nan\n", r"line 1: op 'a': seconds must be a finite number >= 0, got 'nan'"),
        ("a,1e400\n", r"got '1e400'"),
        ("a,-1\n", r"got '-1'"),
        ("a,\n", r"got ''"),
        ("a,1_000\n", r"got '1_000'"),
        ("a,0x10\n", r"got '0x10'"),
        ("a,١\n", r"got '١'"),
        ("a,0.5,1\n", r"line 1: must be 'op,seconds', got 3 cells"),
        ("ax,0.5\n", r"profile names op 'ax', which is not in graph 'tiny'; did you mean 'a'\?"),
        ("a\nb,0.5\n", r"line 1: must be 'op,seconds', got 1 cells"),
        ('"a\nb",0.5\n', r"profile names op 'a\\nb'"),
        ('"a,0.5\n', r"line 1: not valid CSV \(unexpected end of data\)"),
    ],
)
def test_csv_profile_errors_name_the_line_and_rule(tmp_path, text, message) -> None:
    path = tmp_path / "p.csv"
    path.write_text(text)
    with pytest.raises(GraphError, match=message):
        _profile(path)
    outcome(_profile, path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 0.5, "a": 0.25}', r"key 1: op 'a' is named twice"),
        ('{"a": NaN}', r"key 0: op 'a': seconds must be a finite number >= 0, got NaN"),
        ('{"a": 1e400}', r"got Infinity"),
        ('{"a": "0.5"}', r"got '0.5'"),
        ('{"a": true}', r"got true"),
        ('{"a": -1}', r"got -1"),
        ('{"": 1}', r"key 0: op name must be non-empty"),
        ('[["a", 1]]', r"a profile must be a JSON object"),
        ("[]", r"a profile must be a JSON object"),
        ('{"a": 1' + "0" * 5000 + "}", r"not valid JSON"),
        ("[" * 100_000, r"not valid JSON"),
    ],
)
def test_json_profile_errors_name_the_key_and_rule(tmp_path, text, message) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(GraphError, match=message):
        _profile(path)
    outcome(_profile, path)


def test_accepted_profiles(tmp_path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("\ufeffOP, Seconds\r\n\r\na, 0.5 \r\nb,+1E-3\r\nc,-0\r\n")
    assert read_profile(path) == {"a": 0.5, "b": 0.001, "c": 0.0}
    path = tmp_path / "p.json"
    path.write_text('{"a": 2, "c": 1.5e-6}')
    profile, graph = _profile(path)
    assert profile == {"a": 2.0, "c": 1.5e-6}
    assert graph.op_runtime.tolist() == [2.0, 1.0, 1.5e-6]
    path.write_text("{}")
    assert _profile(path)[1].op_runtime.tolist() == GRAPH.op_runtime.tolist()


# ---------------------------------------------------------------------------------- the CLI
def check_import(directory: Path, suffix: str, mutant: bytes) -> None:
    graph_path = directory / "tiny.json"
    if not graph_path.exists():
        write_graph(GRAPH, graph_path)
    profile = directory / f"cli-profile{suffix}"
    profile.write_bytes(mutant)
    run_cli("import", graph_path, "-o", directory / "out.json", "--profile", profile)


@fuzz_settings(3)
@given(suffix=st.sampled_from([".csv", ".json"]), data=st.data())
def test_import_with_mutant_profiles(tmp_path_factory, suffix, data) -> None:
    mutant = data.draw(csv_mutants() if suffix == ".csv" else json_mutants())
    check_import(tmp_path_factory.getbasetemp(), suffix, mutant)


@pytest.mark.slow
@fuzz_settings(100)
@given(suffix=st.sampled_from([".csv", ".json"]), data=st.data())
def test_import_with_mutant_profiles_slow(tmp_path_factory, suffix, data) -> None:
    mutant = data.draw(csv_mutants() if suffix == ".csv" else json_mutants())
    check_import(tmp_path_factory.getbasetemp(), suffix, mutant)
