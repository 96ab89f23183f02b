"""``common.bulk``: the cyclic garbage collector paused for a block and restored after it."""

import gc
import weakref

import pytest

from segment_balancer.common.bulk import cycle_collection_paused


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_and_running_after(collector_enabled):
    with cycle_collection_paused():
        assert not gc.isenabled()
        with cycle_collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer one's pause
    assert gc.isenabled()


def test_restored_after_an_error(collector_enabled):
    with pytest.raises(ValueError), cycle_collection_paused():
        raise ValueError("in the block")
    assert gc.isenabled()


def test_a_paused_collector_stays_paused(collector_enabled):
    gc.disable()
    with cycle_collection_paused():
        pass
    assert not gc.isenabled()


def test_cycles_left_by_the_block_are_collected_after(collector_enabled):
    class Node:
        pass

    with cycle_collection_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        assert ref() is not None  # a cycle: nothing collects it while paused
    gc.collect()
    assert ref() is None


def test_memory_is_given_back_only_above_the_threshold(monkeypatch):
    """A process below ``GIVE_BACK_ABOVE_BYTES`` resident keeps its heap; above it, the cycles it
    left are collected and the heaps trimmed, and the resident size is this process's own."""
    import gc

    from segment_balancer.common import bulk

    resident = bulk.resident_bytes()
    assert resident is not None and 10 << 20 < resident < 64 << 30  # a Python process on Linux
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(a) or 0)
    monkeypatch.setattr(bulk, "GIVE_BACK_ABOVE_BYTES", resident + (1 << 30))
    bulk.give_back_memory()
    assert collections == []
    monkeypatch.setattr(bulk, "GIVE_BACK_ABOVE_BYTES", 0)
    bulk.give_back_memory()
    assert collections == [()]
