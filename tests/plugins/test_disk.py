"""The disk check of resolve_snapshot: a snapshot's uncompressed bytes and the run's estimate."""

from __future__ import annotations

import gzip
from collections import namedtuple

import pytest

from segment_balancer_airflow import disk
from segment_balancer_airflow.disk import (
    FIXED_BYTES,
    FIXED_PER_SIMULATED_RUN,
    PER_SIMULATED_RUN,
    PER_SNAPSHOT_BYTE,
    NotEnoughRoom,
    check_room,
    estimate_run_bytes,
    snapshot_bytes,
    uncompressed_bytes,
)


@pytest.fixture
def snapshot(tmp_path):
    """servers.json of 1,000 bytes and segments.jsonl.gz of 100,000 bytes once uncompressed."""
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "servers.json").write_bytes(b"s" * 1000)
    (snap / "segments.jsonl.gz").write_bytes(gzip.compress(b'{"a": 1}\n' * 10_000 + b"x" * 10_000))
    return snap


def test_uncompressed_bytes_from_the_gzip_trailer(snapshot):
    assert uncompressed_bytes(snapshot / "segments.jsonl.gz") == 100_000
    assert uncompressed_bytes(snapshot / "servers.json") == 1000
    assert snapshot_bytes(snapshot) == 101_000


def test_a_gzip_trailer_past_4_gib_is_raised_to_the_compressed_size(tmp_path):
    # ISIZE is the size modulo 2**32: a trailer saying 10 on a 100-byte file means 2**32 + 10
    fake = tmp_path / "big.gz"
    fake.write_bytes(b"\x1f\x8b" + b"\0" * 94 + (10).to_bytes(4, "little"))
    assert uncompressed_bytes(fake) == 2**32 + 10


def test_the_estimate_and_simulated_runs(snapshot):
    assert estimate_run_bytes(snapshot) == int(FIXED_BYTES + 101_000 * PER_SNAPSHOT_BYTE)
    # each simulated run writes its own snapshot and plan (run 1 too: the plan and its snapshot copied)
    assert estimate_run_bytes(snapshot, 3) == int(
        FIXED_BYTES + 101_000 * PER_SNAPSHOT_BYTE + 3 * (FIXED_PER_SIMULATED_RUN + 101_000 * PER_SIMULATED_RUN)
    )
    # the other coordinator's plan of a compared run counts as one more simulated run
    assert estimate_run_bytes(snapshot, 3, compare=True) == estimate_run_bytes(snapshot, 4)


@pytest.mark.parametrize(
    "size, runs, measured_mib",
    [
        ("druid_sample", 0, 5.1),
        ("100000", 0, 47.1),
        ("1000000", 0, 371.6),
        ("druid_sample", 3, 23.8),
        ("100000", 3, 159.2),
    ],
)
def test_the_estimate_covers_what_bench_disk_measured(monkeypatch, size, runs, measured_mib):
    """benchmarks/README.md, bench_disk.py: the peak bytes of a run (of uncompressed snapshots of
    0.004, 69.4 and 716.0 MiB) never above the estimate, and the estimate under twice it."""
    uncompressed = {"druid_sample": 4_500, "100000": 69.4 * 2**20, "1000000": 716.0 * 2**20}[size]
    monkeypatch.setattr(disk, "snapshot_bytes", lambda _: uncompressed)
    estimate = estimate_run_bytes("snapshot", runs) / 2**20
    assert measured_mib <= estimate < 2 * measured_mib + 16


def test_check_room_names_the_path_the_free_bytes_and_the_estimate(snapshot, tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(disk.shutil, "disk_usage", lambda p: usage(0, 0, 5 * 2**20))
    home = tmp_path / "not" / "yet"  # the nearest existing directory is checked
    with pytest.raises(NotEnoughRoom) as refused:
        check_room(home, snapshot)
    estimate = estimate_run_bytes(snapshot)
    assert str(refused.value) == (
        f"{tmp_path} has 0.00 GiB (5,242,880 bytes) free, and a run on {snapshot} is estimated to write "
        f"{estimate / 2**30:.2f} GiB ({estimate:,} bytes) there: free some space (or let retention remove old "
        "plans) and trigger again"
    )
    monkeypatch.setattr(disk.shutil, "disk_usage", lambda p: usage(0, 0, estimate))
    assert check_room(home, snapshot) == estimate
