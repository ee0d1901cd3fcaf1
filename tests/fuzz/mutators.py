"""Hypothesis strategies that turn a valid seed input into a mutant (issue 15, item 1).

Every reader of user input is fuzzed by handing it mutants of valid files: a reader must refuse
a mutant with the project's own one-line error, or accept it as a valid input (see harness.py).
The strategies here only make mutants; they know nothing of graphopt's formats, so each test
drives them with its own seeds and vocabularies (field names, op names, member names).

A mutant is a short list of mutations drawn one after another, each with its parameters drawn
by hypothesis, so a failing mutant shrinks to the fewest and simplest mutations that still fail
(one truncation, one renamed key, one value replaced by NaN).

Families:
    bytes: `mutated_bytes` flips bits, overwrites bytes and machine words, inserts, deletes and
        duplicates byte runs, truncates, and splices in runs of other seeds.
    zip archives (.npz, torch .pt): `mutated_zip` drops, duplicates, renames, reorders, adds,
        truncates, extends, compresses and swaps members, corrupts their CRCs, mutates their
        bytes, replaces their .npy arrays (`mutated_npy`: another dtype or shape, object, 0-d,
        huge-shape or hand-written headers, edge values) or hands a bare member over as the
        whole file; `mutated_archive` mixes these with plain byte mutations.
    JSON-like documents: `mutated_document` mutates a parsed document (dicts, lists, scalars,
        and opaque leaves such as tensors): edge values (huge, negative and non-finite numbers,
        -0.0, booleans, null, odd strings, containers), deleted, added, duplicated and misspelt
        keys, reordered, duplicated and truncated lists, changed types, deep nesting.
        `mutated_json` also writes what only JSON text can hold (duplicate keys, 1e400, a
        5,000-digit integer, 100,000 levels of nesting) and returns the text.
    CSV tables: `mutated_csv` edits cells, rows and columns and writes them back with another
        delimiter, line ending, quoting, padding or byte-order mark.

Usage, with harness.py (import both as `fuzz.mutators` and `fuzz.harness`):

    @fuzz_settings(FAST_EXAMPLES)
    @given(text=mutated_json(SEED_DOCUMENT, vocabulary=("ops", "tensors", "a", "b")))
    def test_graph_json_mutants(tmp_path_factory, text):
        path = tmp_path_factory.getbasetemp() / "g.json"
        path.write_text(text, errors="surrogatepass")
        result = outcome(read_graph, path)    # raises Defect on anything but a clean refusal
        if result.accepted:
            assert_scored_identically(result.value)
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import struct
import warnings
import zipfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from hypothesis import strategies as st

# ---------------------------------------------------------------------------------- edge values
EDGE_INTS: tuple[int, ...] = (
    0,
    1,
    -1,
    2,
    255,
    256,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**32,
    2**53,
    2**53 + 1,
    2**62,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**30,
    -(10**30),
)
"""Integers at the edges of int32, int64, uint64 and float64's exact range, and beyond."""

EDGE_FLOATS: tuple[float, ...] = (
    0.0,
    -0.0,
    0.5,
    -0.5,
    1e-310,
    5e-324,
    1e-30,
    1e16,
    2.0**53,
    1e300,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    math.nan,
    math.inf,
    -math.inf,
)
"""Floats: signed zeros, subnormals, the largest finite, NaN and the infinities."""

EDGE_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "a",
    "a" * 10_000,
    "\n",
    "a\nb",
    "a\rb",
    "a\r\nb",
    "\t",
    "\x00",
    "\x1b[31mred\x1b[0m",
    "\x0b\x0c\x1c\x1d\x1e\x85",
    "a\u2028b",
    "a\u2029b",
    "\ufeff",
    "\ud800",
    "\u00a0",
    "é",
    "名前",
    "\U0001d518",
    "'",
    '"',
    "\\",
    "a,b",
    "../../etc/passwd",
    "NaN",
    "Infinity",
    "null",
    "true",
    "0",
    "-1",
    "1e400",
)
"""Strings: empty, long, line breaks of every kind, control and escape characters, a lone
surrogate, non-ASCII letters, quotes, separators, and words that look like other types."""

NUMBER_TEXTS: tuple[str, ...] = (
    "0",
    "-0",
    "1",
    "-1",
    "0.25",
    "+1",
    "1.",
    ".5",
    "1e-400",
    "1e400",
    "-1e400",
    "1E308",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "1_000",
    "0x10",
    " 1",
    "1 ",
    "1,5",
    "1e",
    "e5",
    "--1",
    "١٢",
    "１",
    "True",
    "None",
    "9" * 400,
    "9" * 5_000,
    "",
)
"""Text a number parser meets in CSV cells: valid, out of range, non-finite, padded, with
underscores or hex, non-ASCII digits, and words."""

JSON_LITERALS: tuple[str, ...] = (
    "1e400",
    "-1e400",
    "1E-400",
    "-0",
    "NaN",
    "Infinity",
    "-Infinity",
    "1" * 5_000,
    "0.1e99999",
    "1.0000000000000000000000001",
    "123456789012345678901234567890",
)
"""Number literals only JSON text can carry: out of float range, beyond Python's 4,300-digit
integer limit, and the non-standard NaN / Infinity that Python's json module accepts."""

INTERESTING_BYTES: tuple[int, ...] = (
    0x00,
    0xFF,
    0x01,
    0x7F,
    0x80,
    0x0A,
    0x0D,
    0x20,
    0x22,
    0x27,
    0x2C,
    0x2D,
    0x30,
    0x39,
    0x5B,
    0x5C,
    0x7B,
)
"""Bytes that matter to parsers: NUL, 0xFF, sign bits, line breaks, quotes, separators,
digits, brackets and backslash."""

INTERESTING_WORDS: tuple[int, ...] = (
    0,
    1,
    -1,
    0x7F,
    0x80,
    0x7FFF,
    0x8000,
    2**31 - 1,
    -(2**31),
    2**32 - 1,
    2**62,
    2**63 - 1,
    -(2**63),
)
"""Integers written over 1, 2, 4 or 8 bytes (little-endian): lengths, counts and offsets."""

NPY_DTYPES: tuple[str, ...] = (
    "<i8",
    "<i4",
    "<u8",
    "|u1",
    "|i1",
    "|b1",
    "<f8",
    "<f4",
    "<f2",
    "<c16",
    ">i8",
    ">f8",
    "<U3",
    "|S3",
    "|V8",
    "<m8[s]",
)
"""dtypes a replaced .npy member may get: every width and signedness, floats, complex,
big-endian, strings, raw void and timedelta."""


@dataclass(frozen=True)
class Raw:
    """Text written verbatim into JSON: what no Python value serializes to (1e400, deep nesting)."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """A JSON object written from (key, value) pairs, so a key can appear twice."""

    pairs: tuple[tuple[str, Any], ...]


def edge_values(
    vocabulary: Sequence[str] = (), text: bool = False, extra: Sequence[Any] = ()
) -> st.SearchStrategy[Any]:
    """A value at the edge of what a reader expects, for replacing any value of a document.

    Args:
        vocabulary: the format's own words (field names, op names, enum values), which often
            pass a first check and fail a deeper one.
        text: also draw `Raw` JSON literals (only `to_json` can write them).
        extra: more values to draw from, e.g. tensors for a torch record.
    """
    scalars = [None, True, False, *EDGE_INTS, *EDGE_FLOATS, *EDGE_STRINGS, *vocabulary, *extra]
    containers = st.sampled_from(
        [[], {}, [0], [None], {"": 0}, [[[]]], {"a": {"b": {}}}, [0] * 1000, list(vocabulary)]
    )
    options = [
        st.sampled_from(scalars),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        containers,
    ]
    if text:
        options.append(st.sampled_from([Raw(literal) for literal in JSON_LITERALS]))
    return st.one_of(*options)


# ------------------------------------------------------------------------------------- words
def near_miss(word: str) -> st.SearchStrategy[str]:
    """A misspelling of `word`: a letter dropped, inserted, swapped or replaced, a plural
    toggled, another case, another separator, or padding; what a reader must not match."""

    @st.composite
    def draw_miss(draw: st.DrawFn) -> str:
        n = len(word)
        kinds = ["insert", "plural", "case", "pad", "separator"]
        if n:
            kinds += ["drop", "replace"]
        if n >= 2:
            kinds.append("swap")
        kind = draw(st.sampled_from(kinds))
        if kind == "drop":
            i = draw(st.integers(0, n - 1))
            return word[:i] + word[i + 1 :]
        if kind == "insert":
            i = draw(st.integers(0, n))
            return word[:i] + draw(st.sampled_from("esa_ 0")) + word[i:]
        if kind == "swap":
            i = draw(st.integers(0, n - 2))
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if kind == "replace":
            i = draw(st.integers(0, n - 1))
            return word[:i] + draw(st.sampled_from("aeo_0-")) + word[i + 1 :]
        if kind == "plural":
            return word[:-1] if word.endswith("s") else word + "s"
        if kind == "case":
            return word.upper() if word != word.upper() else word.lower()
        if kind == "separator":
            swapped = word.replace("_", "-") if "_" in word else word.replace("-", "_")
            return swapped if swapped != word else word.replace(".", "_") + "_"
        return draw(st.sampled_from([f" {word}", f"{word} ", f"{word}\n", f"\ufeff{word}"]))

    return draw_miss()


# ------------------------------------------------------------------------------------- bytes
@st.composite
def _byte_mutation(draw: st.DrawFn, data: bytes, splice: Sequence[bytes]) -> bytes:
    n = len(data)
    kinds = ["truncate", "insert"]
    if n:
        kinds += ["flip", "set", "word", "delete", "duplicate"]
    if splice:
        kinds.append("splice")
    kind = draw(st.sampled_from(kinds))
    if kind == "truncate":
        return data[: draw(st.integers(0, max(n - 1, 0)))]
    if kind == "insert":
        at = draw(st.integers(0, n))
        run = draw(
            st.one_of(
                st.binary(min_size=1, max_size=16),
                st.builds(
                    lambda b, k: bytes([b]) * k,
                    st.sampled_from(INTERESTING_BYTES),
                    st.integers(1, 4096),
                ),
            )
        )
        return data[:at] + run + data[at:]
    if kind == "flip":
        at = draw(st.integers(0, n - 1))
        return data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    if kind == "set":
        at = draw(st.integers(0, n - 1))
        return data[:at] + bytes([draw(st.sampled_from(INTERESTING_BYTES))]) + data[at + 1 :]
    if kind == "word":
        width = draw(st.sampled_from([1, 2, 4, 8]))
        at = draw(st.integers(0, n - 1))
        value = draw(st.sampled_from(INTERESTING_WORDS)) % (1 << (8 * width))
        word = value.to_bytes(width, "little")[: n - at]
        return data[:at] + word + data[at + len(word) :]
    if kind == "delete":
        at = draw(st.integers(0, n - 1))
        return data[:at] + data[at + draw(st.integers(1, n - at)) :]
    if kind == "duplicate":
        at = draw(st.integers(0, n - 1))
        run = data[at : at + draw(st.integers(1, n - at))]
        to = draw(st.integers(0, n))
        return data[:to] + run + data[to:]
    other = draw(st.sampled_from(list(splice)))
    start = draw(st.integers(0, len(other)))
    run = other[start : start + draw(st.integers(0, len(other) - start))]
    at = draw(st.integers(0, n))
    return data[:at] + run + data[at + draw(st.integers(0, n - at)) :]


@st.composite
def mutated_bytes(
    draw: st.DrawFn, seed: bytes, splice: Sequence[bytes] = (), max_mutations: int = 4
) -> bytes:
    """`seed` after 1 to `max_mutations` byte-level mutations.

    Args:
        seed: a valid file's bytes.
        splice: other valid files, whose byte runs can be spliced into the seed.
        max_mutations: most mutations applied in turn.
    """
    data = bytes(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        data = draw(_byte_mutation(data, splice))
    return data


# --------------------------------------------------------------------------------------- npy
def npy_bytes(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    """An array as the bytes of a .npy file (object arrays pickled, as numpy writes them)."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version, allow_pickle=True)
    return buffer.getvalue()


def npy_with_header(header: str, data: bytes) -> bytes:
    """A version 1.0 .npy file with a hand-written header (any shape, even one data can't fill)."""
    text = header + " " * (-(len(header) + 11) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1") + data


def _load_npy(data: bytes) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:  # a member that is not a .npy: mutate a small stand-in instead
        return np.arange(4, dtype=np.int64)


def _edge_value_for(dtype: np.dtype) -> st.SearchStrategy[Any]:
    if dtype.kind == "b":
        return st.sampled_from([0, 1, 2, 255])  # raw bytes: 2 and 255 are not valid bools
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.sampled_from(
            sorted(
                {
                    v
                    for v in (0, 1, -1, info.min, info.max, 2**31 - 1, 2**31, 2**53, 2**62)
                    if info.min <= v <= info.max
                }
            )
        )
    if dtype.kind == "f":
        return st.sampled_from([math.nan, math.inf, -math.inf, -0.0, -1.0, 1e300, 5e-324, 1e38])
    return st.just(0)


@st.composite
def mutated_npy(draw: st.DrawFn, data: bytes) -> bytes:
    """A .npy member's replacement: its array with another dtype, shape, values or header.

    Args:
        data: the member's bytes (a valid .npy file, or anything: then a stand-in array).
    """
    array = _load_npy(data)
    flat = array.reshape(-1)
    kind = draw(
        st.sampled_from(
            [
                "values",
                "dtype",
                "shorter",
                "longer",
                "scalar",
                "empty",
                "matrix",
                "fortran",
                "object",
                "huge_shape",
                "negative_shape",
                "header",
                "version",
            ]
        )
    )
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if kind == "values" and flat.size and array.dtype.kind in "biuf":
            changed = flat.copy()
            raw = changed.view(np.uint8) if changed.dtype.kind == "b" else changed
            at = draw(st.integers(0, flat.size - 1))
            raw[at] = draw(_edge_value_for(array.dtype))
            return npy_bytes(changed)
        if kind == "dtype":
            dtype = np.dtype(draw(st.sampled_from(NPY_DTYPES)))
            try:
                return npy_bytes(flat.astype(dtype))
            except (TypeError, ValueError):
                return npy_bytes(np.zeros(flat.size, dtype=dtype))
        if kind == "shorter":
            return npy_bytes(flat[: draw(st.integers(0, max(flat.size - 1, 0)))])
        if kind == "longer":
            extra = flat[: draw(st.integers(1, 8))] if flat.size else np.zeros(3, flat.dtype)
            return npy_bytes(np.concatenate([flat, extra]))
        if kind == "scalar":
            return npy_bytes(flat[0] if flat.size else np.array(0, dtype=flat.dtype))
        if kind == "empty":
            return npy_bytes(flat[:0])
        if kind in ("matrix", "fortran"):
            matrix = np.stack([flat, flat])
            return npy_bytes(np.asfortranarray(matrix) if kind == "fortran" else matrix)
        if kind == "object":
            return npy_bytes(np.array([*flat.tolist()[:8], None, "x"], dtype=object))
        if kind in ("huge_shape", "negative_shape"):
            length = draw(st.sampled_from([2**31, 2**40, 2**62, 2**63 - 1]))
            length = -length if kind == "negative_shape" else length
            header = (
                f"{{'descr': '{array.dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
            )
            return npy_with_header(header, flat.tobytes())
        if kind == "header":
            header = draw(
                st.sampled_from(
                    [
                        "{'descr': '<i8', 'fortran_order': False}",
                        "{'descr': 'nonsense', 'fortran_order': False, 'shape': (1,), }",
                        "{'descr': '<i8', 'fortran_order': 0, 'shape': (1,), }",
                        "{'descr': '<i8', 'fortran_order': False, 'shape': (1.5,), }",
                        "{'descr': [('a', '<i8')], 'fortran_order': False, 'shape': (1,), }",
                        "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                        "[" * 200 + "]" * 200,
                        "__import__('os')",
                        "",
                    ]
                )
            )
            return npy_with_header(header, flat.tobytes())
        return npy_bytes(flat, version=draw(st.sampled_from([(2, 0), (3, 0)])))


# --------------------------------------------------------------------------------------- zip
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Member:
    """One zip member as the mutations see it.

    Attributes:
        name: the member's file name.
        data: its uncompressed bytes.
        compress_type: zipfile's compression constant it is written with.
        bad_crc: write a CRC-32 that does not match the data.
    """

    name: str
    data: bytes
    compress_type: int = zipfile.ZIP_STORED
    bad_crc: bool = False


def read_members(archive: bytes) -> list[Member]:
    """The members of a valid zip archive, in order."""
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        return [Member(info.filename, opened.read(info)) for info in opened.infolist()]


def write_members(members: Sequence[Member]) -> bytes:
    """Members as a zip archive, duplicates included, with the CRC-32s asked to be wrong."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(buffer, "w") as archive:
            for member in members:
                info = zipfile.ZipInfo(member.name, date_time=_EPOCH)
                info.compress_type = member.compress_type
                archive.writestr(info, member.data)
    data = bytearray(buffer.getvalue())
    for index, member in enumerate(members):
        if member.bad_crc:
            _corrupt_crc(data, index)
    return bytes(data)


def _corrupt_crc(data: bytearray, index: int) -> None:
    """Flips the CRC-32 of entry `index` in its local header and the central directory."""
    end = data.rfind(b"PK\x05\x06")
    central = struct.unpack_from("<I", data, end + 16)[0]
    for _ in range(index):
        names, extra, comment = struct.unpack_from("<HHH", data, central + 28)
        central += 46 + names + extra + comment
    local = struct.unpack_from("<I", data, central + 42)[0]
    for at in (central + 16, local + 14):
        crc = struct.unpack_from("<I", data, at)[0]
        struct.pack_into("<I", data, at, crc ^ 0x00010001)


@st.composite
def _member_name(draw: st.DrawFn, name: str, names: Sequence[str]) -> str:
    stem, dot, suffix = name.rpartition(".")
    options: list[st.SearchStrategy[str]] = [near_miss(name), st.sampled_from(list(names))]
    if dot:
        options.append(st.just(stem))
        options.append(st.sampled_from([f"{stem}.NPY", f"{stem}.npz", f"{stem}.{suffix}.{suffix}"]))
    else:
        options.append(st.just(f"{name}.npy"))
    options.append(st.sampled_from([f"/{name}", f"../{name}", f"x/{name}", "", "/", name + "\x00"]))
    return draw(st.one_of(options))


@st.composite
def _zip_mutation(
    draw: st.DrawFn, members: list[Member], names: Sequence[str], blobs: Sequence[bytes]
) -> list[Member] | bytes:
    n = len(members)
    kinds = ["add"]
    if n:
        kinds += [
            "drop",
            "bytes",
            "npy",
            "truncate",
            "rename",
            "duplicate",
            "extend",
            "crc",
            "compress",
            "bare",
        ]
    if n >= 2:
        kinds += ["swap", "reorder"]
    if blobs and n:
        kinds.append("replace")
    kind = draw(st.sampled_from(kinds))
    if kind == "add":
        name = draw(st.one_of(st.sampled_from([*names, "extra.npy", "x"]), st.text(max_size=6)))
        source = draw(st.sampled_from([m.data for m in members] or [b""]))
        return [*members, Member(name, source)]
    i = draw(st.integers(0, n - 1))
    member = members[i]
    changed = list(members)
    if kind == "drop":
        del changed[i]
    elif kind == "bytes":
        changed[i] = replace(member, data=draw(mutated_bytes(member.data, max_mutations=2)))
    elif kind == "npy":
        changed[i] = replace(member, data=draw(mutated_npy(member.data)))
    elif kind == "truncate":
        cut = draw(st.integers(0, max(len(member.data) - 1, 0)))
        changed[i] = replace(member, data=member.data[:cut])
    elif kind == "rename":
        all_names = [m.name for m in members] + list(names)
        changed[i] = replace(member, name=draw(_member_name(member.name, all_names)))
    elif kind == "duplicate":
        copy_of = replace(member, data=draw(st.sampled_from([member.data, member.data[:8]])))
        changed.insert(draw(st.integers(0, n)), copy_of)
    elif kind == "extend":
        changed[i] = replace(member, data=member.data + draw(st.binary(min_size=1, max_size=64)))
    elif kind == "crc":
        changed[i] = replace(member, bad_crc=True)
    elif kind == "compress":
        method = draw(st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]))
        changed[i] = replace(member, compress_type=method)
    elif kind == "bare":
        return member.data
    elif kind == "replace":
        changed[i] = replace(member, data=draw(st.sampled_from(list(blobs))))
    elif kind == "swap":
        j = draw(st.integers(0, n - 1))
        changed[i], changed[j] = (
            replace(member, data=members[j].data),
            replace(members[j], data=member.data),
        )
    else:
        changed = draw(st.permutations(members))
    return changed


@st.composite
def mutated_zip(
    draw: st.DrawFn,
    seed: bytes,
    names: Sequence[str] = (),
    blobs: Sequence[bytes] = (),
    max_mutations: int = 3,
) -> bytes:
    """A zip archive (.npz, torch .pt) after 1 to `max_mutations` member-level mutations.

    Args:
        seed: a valid archive's bytes.
        names: member names to rename members to or add (the format's own and near misses).
        blobs: byte strings a member's data may be replaced with (e.g. a pickle that would run
            code if unpickled unsafely).
        max_mutations: most mutations applied in turn.
    """
    members = read_members(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        result = draw(_zip_mutation(members, names, blobs))
        if isinstance(result, bytes):
            return result
        members = result
    return write_members(members)


def mutated_archive(
    seed: bytes,
    names: Sequence[str] = (),
    blobs: Sequence[bytes] = (),
    splice: Sequence[bytes] = (),
) -> st.SearchStrategy[bytes]:
    """Member-level mutations, byte-level mutations of the whole file, or both."""
    members = mutated_zip(seed, names, blobs)
    return st.one_of(
        members,
        mutated_bytes(seed, splice),
        members.flatmap(lambda data: mutated_bytes(data, splice, max_mutations=1)),
    )


# ---------------------------------------------------------------------------------- documents
DocPath = tuple[Hashable, ...]


def _paths(document: Any) -> list[DocPath]:
    """Every path into a document (keys of mappings, indices of lists), the root first."""
    paths: list[DocPath] = []
    stack: list[tuple[DocPath, Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        paths.append(path)
        if isinstance(node, Mapping):
            stack.extend((path + (key,), value) for key, value in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((path + (i,), value) for i, value in reversed(list(enumerate(node))))
    return paths


def _get(document: Any, path: DocPath) -> Any:
    for key in path:
        document = document[key]
    return document


def _set(document: Any, path: DocPath, value: Any) -> Any:
    """The document with the value at `path` replaced (the document itself when path is ())."""
    if not path:
        return value
    _get(document, path[:-1])[path[-1]] = value
    return document


def _rename(mapping: Mapping[Any, Any], old: Any, new: Any) -> Any:
    """The mapping with key `old` renamed, in place of the old key (same type, same order)."""
    items = [(new if key == old else key, value) for key, value in mapping.items()]
    return type(mapping)(items) if isinstance(mapping, dict) else dict(items)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def _document_mutation(
    draw: st.DrawFn,
    document: Any,
    vocabulary: Sequence[str],
    text: bool,
    extra: Sequence[Any],
    leaf: Callable[[Any], st.SearchStrategy[Any] | None] | None,
) -> Any:
    paths = _paths(document)
    path = draw(st.sampled_from(paths))
    value = _get(document, path)
    parent = _get(document, path[:-1]) if path else None
    kinds = ["replace", "retype", "wrap", "nest"]
    if path:
        kinds.append("delete")
    if isinstance(value, Mapping) and not isinstance(value, Pairs):
        kinds.append("add_key")
    if isinstance(parent, Mapping):
        kinds.append("rename_key")
        if text:
            kinds.append("duplicate_key")
    if isinstance(value, list) and value:
        kinds += ["reorder", "duplicate_item", "truncate"]
    if isinstance(value, int | float) and not isinstance(value, bool):
        kinds.append("tweak")
    custom = leaf(value) if leaf is not None else None
    if custom is not None:
        kinds.append("leaf")
    kind = draw(st.sampled_from(kinds))
    document = copy.deepcopy(document)
    if kind == "replace":
        return _set(document, path, draw(edge_values(vocabulary, text, extra)))
    if kind == "leaf":
        assert custom is not None
        return _set(document, path, draw(custom))
    if kind == "delete":
        del _get(document, path[:-1])[path[-1]]
        return document
    if kind == "add_key":
        key = draw(st.one_of(st.sampled_from([*vocabulary, "", "x"]), near_miss("extra")))
        _get(document, path)[key] = draw(edge_values(vocabulary, text, extra))
        return document
    if kind == "rename_key":
        key = path[-1]
        word = key if isinstance(key, str) else str(key)
        options = [near_miss(word)]
        if vocabulary:
            options.append(st.sampled_from(list(vocabulary)))
        return _set(document, path[:-1], _rename(parent, key, draw(st.one_of(options))))
    if kind == "duplicate_key":
        again = draw(st.one_of(st.just(value), edge_values(vocabulary, text, extra)))
        pairs = [*parent.items()]
        at = draw(st.integers(0, len(pairs)))
        pairs.insert(at, (path[-1], again))
        return _set(document, path[:-1], Pairs(tuple(pairs)))
    if kind == "reorder":
        return _set(document, path, draw(st.permutations(value)))
    if kind == "duplicate_item":
        i = draw(st.integers(0, len(value) - 1))
        changed = list(value)
        changed.insert(draw(st.integers(0, len(value))), copy.deepcopy(value[i]))
        return _set(document, path, changed)
    if kind == "truncate":
        return _set(document, path, value[: draw(st.integers(0, len(value) - 1))])
    if kind == "tweak":
        factor = draw(st.sampled_from([1, -1, 2, 0.5, 10**20, 1e-20]))
        shift = draw(st.sampled_from([0, 1, -1, 0.5]))
        try:
            tweaked = value * factor + shift
        except OverflowError:
            tweaked = math.inf
        return _set(document, path, tweaked)
    if kind == "retype":
        return _set(document, path, _retype(value, draw(st.integers(0, 5))))
    if kind == "wrap":
        wrapped = draw(st.sampled_from([[value], {"value": value}, [value, value]]))
        return _set(document, path, wrapped)
    depth = draw(st.sampled_from([64, 1_000, 100_000] if text else [16, 64, 200]))
    nested = Raw("[" * depth + "]" * depth) if text and depth > 64 else _nested(depth, value)
    return _set(document, path, nested)


def _retype(value: Any, choice: int) -> Any:
    """The value as another JSON type: a number as text, text as a number, an int as a float."""
    if isinstance(value, bool):
        return [int(value), str(value).lower(), float(value), None, [value], 1 - value][choice]
    if isinstance(value, int | float):
        try:
            as_float = float(value)
        except OverflowError:
            as_float = math.inf
        return [
            as_float,
            str(value),
            int(as_float) if math.isfinite(as_float) else None,
            bool(value),
            [value],
            None,
        ][choice]
    if isinstance(value, str):
        return [0, 1.5, True, None, [value], {value: value}][choice]
    return [None, 0, "", True, [], {}][choice]


@st.composite
def mutated_document(
    draw: st.DrawFn,
    seed: Any,
    vocabulary: Sequence[str] = (),
    max_mutations: int = 3,
    extra: Sequence[Any] = (),
    leaf: Callable[[Any], st.SearchStrategy[Any] | None] | None = None,
) -> Any:
    """A parsed document (dicts, lists, scalars, opaque leaves) after 1 to `max_mutations`
    structure-aware mutations; the seed is not modified.

    Args:
        seed: the valid document.
        vocabulary: the format's words: keys to add or rename keys to, values to put anywhere.
        max_mutations: most mutations applied in turn.
        extra: more replacement values (e.g. tensors in a torch record).
        leaf: for a value the generic mutations do not understand (a tensor), a strategy of
            its mutants, or None to leave it to the generic ones.
    """
    document = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        document = draw(_document_mutation(document, vocabulary, False, extra, leaf))
    return document


def to_json(document: Any) -> str:
    """JSON text of a document that may hold `Raw` literals and `Pairs` objects.

    Python's own encoder recurses once per level, so `Raw` carries the deepest nesting.
    """
    if isinstance(document, Raw):
        return document.text
    if isinstance(document, Pairs):
        items = document.pairs
    elif isinstance(document, Mapping):
        items = tuple(document.items())
    elif isinstance(document, list | tuple):
        return "[" + ",".join(to_json(item) for item in document) + "]"
    else:
        return json.dumps(document)
    return "{" + ",".join(f"{json.dumps(str(k))}:{to_json(v)}" for k, v in items) + "}"


@st.composite
def mutated_json(
    draw: st.DrawFn, seed: Any, vocabulary: Sequence[str] = (), max_mutations: int = 3
) -> str:
    """JSON text of a mutated document, with what only text can hold (see `mutated_document`)."""
    document = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        document = draw(_document_mutation(document, vocabulary, True, (), None))
    return to_json(document)


# --------------------------------------------------------------------------------------- CSV
@st.composite
def _csv_mutation(draw: st.DrawFn, rows: list[list[str]], vocabulary: Sequence[str]) -> Any:
    n = len(rows)
    kinds = ["insert_row", "blank_row"]
    if n:
        kinds += ["cell", "delete_row", "duplicate_row", "rename", "add_cell", "drop_cell"]
    if n >= 2:
        kinds.append("swap_rows")
    kind = draw(st.sampled_from(kinds))
    rows = [list(row) for row in rows]
    cells = st.one_of(
        st.sampled_from(NUMBER_TEXTS),
        st.sampled_from(EDGE_STRINGS),
        st.text(max_size=6),
        *([st.sampled_from(list(vocabulary))] if vocabulary else []),
    )
    if kind == "insert_row":
        first = [*vocabulary, *(r[0] for r in rows if r)] or ["x"]
        name = draw(st.one_of(st.sampled_from(first), st.sampled_from(first).flatmap(near_miss)))
        rows.insert(draw(st.integers(0, n)), [name, draw(st.sampled_from(NUMBER_TEXTS))])
        return rows
    if kind == "blank_row":
        rows.insert(draw(st.integers(0, n)), draw(st.sampled_from([[], [""], ["", ""]])))
        return rows
    i = draw(st.integers(0, n - 1))
    row = rows[i]
    if kind == "cell" and row:
        row[draw(st.integers(0, len(row) - 1))] = draw(cells)
    elif kind == "rename" and row:
        row[0] = draw(near_miss(row[0]))
    elif kind == "add_cell":
        row.insert(draw(st.integers(0, len(row))), draw(cells))
    elif kind == "drop_cell" and row:
        del row[draw(st.integers(0, len(row) - 1))]
    elif kind == "delete_row":
        del rows[i]
    elif kind == "duplicate_row":
        rows.insert(draw(st.integers(0, n)), list(row))
    elif kind == "swap_rows":
        j = draw(st.integers(0, n - 1))
        rows[i], rows[j] = rows[j], rows[i]
    return rows


@st.composite
def csv_text(draw: st.DrawFn, rows: Sequence[Sequence[str]]) -> str:
    """Rows as CSV text in a drawn dialect: delimiter, line ending, quoting, padding, BOM."""
    delimiter = draw(st.sampled_from([",", ",", ";", "\t", "|"]))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    pad = draw(st.sampled_from(["", "", " ", "  "]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator=ending, quoting=quoting)
    writer.writerows([[f"{pad}{cell}" for cell in row] for row in rows])
    text = buffer.getvalue()
    if draw(st.booleans()):
        text = text.removesuffix(ending)
    return draw(st.sampled_from(["", "", "\ufeff"])) + text


@st.composite
def mutated_csv(
    draw: st.DrawFn,
    seed: Sequence[Sequence[str]],
    vocabulary: Sequence[str] = (),
    max_mutations: int = 3,
) -> str:
    """CSV text of `seed` rows after 0 to `max_mutations` row and cell mutations, in a drawn
    dialect (a table that only changes dialect is a mutant too).

    Args:
        seed: the valid table's rows (header included).
        vocabulary: words for new cells and rows (e.g. the graph's op names).
        max_mutations: most mutations applied in turn.
    """
    rows = [list(row) for row in seed]
    for _ in range(draw(st.integers(0, max_mutations))):
        rows = draw(_csv_mutation(rows, vocabulary))
    return draw(csv_text(rows))
