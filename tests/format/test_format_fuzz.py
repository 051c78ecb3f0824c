"""Fuzzing the reader with mutated `_metadata` bytes (real Flink files and hand-built ones).

Property: every input either parses, or raises a MetadataFormatError; never another exception,
never a hang (hypothesis deadline + pytest-timeout), never a large allocation (tracemalloc peak).
Anything accepted must also be reproducible: writing the parsed model gives the input back, so
the codec can never silently "repair" a file it does not fully understand.
"""
from __future__ import annotations

import io
import struct
import tracemalloc
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekeeper.format import MetadataFormatError, extract_references, read_metadata, to_bytes
from tests.format.support.samples import sample_model

URI = "file:///fuzz/job/chk-1/_metadata"
# Peak Python allocation allowed while parsing one mutated file: a few buffers and the model of a
# small file. A count/length taken from the file without a bound check would blow far past it.
PEAK_LIMIT = 24 << 20

_EXTREMES_32 = [0x7FFFFFFF, -0x80000000, -1, 0, 1 << 30, 65535, 0x10000]
_EXTREMES_64 = [0x7FFFFFFFFFFFFFFF, -(1 << 63), -1, 1 << 40]


@st.composite
def mutations(draw, data: bytes):
    """A short sequence of structural mutations of `data`."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not buf:
            break
        pos = draw(st.integers(0, len(buf) - 1))
        op = draw(st.sampled_from(["truncate", "flip", "i32", "i64", "u16", "insert", "delete", "byte"]))
        if op == "truncate":
            del buf[pos:]
        elif op == "flip":
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            buf[pos] = draw(st.integers(0, 255))
        elif op == "i32" and pos + 4 <= len(buf):
            struct.pack_into(">i", buf, pos, draw(st.sampled_from(_EXTREMES_32)))
        elif op == "i64" and pos + 8 <= len(buf):
            struct.pack_into(">q", buf, pos, draw(st.sampled_from(_EXTREMES_64)))
        elif op == "u16" and pos + 2 <= len(buf):
            struct.pack_into(">H", buf, pos, draw(st.sampled_from([0, 1, 0xFFFF, 0x8000])))
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del buf[pos : pos + draw(st.integers(1, 16))]
    return bytes(buf)


def check_one(mutated: bytes) -> None:
    tracemalloc.start()
    try:
        try:
            model = read_metadata(io.BytesIO(mutated), URI, load_inline=True)
        except MetadataFormatError:
            return
        finally:
            _, peak = tracemalloc.get_traced_memory()
        assert peak < PEAK_LIMIT, f"parsing {len(mutated)} bytes allocated {peak} bytes"
    finally:
        tracemalloc.stop()
    # accepted → exactly reproducible, and reference extraction fails closed or succeeds
    assert to_bytes(model) == mutated
    try:
        extract_references(model, URI)
    except MetadataFormatError:
        pass


FUZZ = settings(
    max_examples=400,
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_fuzz_hand_built(version):
    seed = to_bytes(sample_model(version))

    @FUZZ
    @given(mutations(seed))
    def run(mutated):
        check_one(mutated)

    run()


def _real_seeds():
    from tests.plugins.flink import flink_params

    # One scenario per feature family keeps the budget bounded: incremental RocksDB (shared
    # lists), inline-heavy (tag 1), unaligned (channel state, V6 encodings), file merging
    # (tags 15-17), savepoints (canonical/native, trailer variants).
    wanted = ["incremental", "inline_heavy", "unaligned", "file_merging", "savepoints"]
    return flink_params(scenarios=wanted)


@pytest.mark.flink
@pytest.mark.timeout(600)
@pytest.mark.parametrize("version,scenario", _real_seeds())
def test_fuzz_real_flink_metadata(flink_fixture, version, scenario):
    files = flink_fixture(version, scenario).metadata_files()
    # the three smallest files of the store keep examples fast; real structure is what matters
    seeds = sorted((p.read_bytes() for p in files), key=len)[:3]

    @settings(FUZZ, max_examples=300)
    @given(st.sampled_from(seeds).flatmap(mutations))
    def run(mutated):
        check_one(mutated)

    run()
