"""The machine's cache: entries by content and code, whole or absent, the newest kept, off when asked."""

import hashlib
import os

from segment_balancer.common import cache


def test_a_content_key_follows_the_bytes_and_the_name_never_the_time(tmp_path):
    a, b = tmp_path / "a" / "segments.jsonl", tmp_path / "b" / "segments.jsonl"
    a.parent.mkdir(), b.parent.mkdir()
    a.write_bytes(b'{"x": 1}\n')
    b.write_bytes(b'{"x": 1}\n')
    os.utime(b, (1, 1))
    assert cache.content_key(a) == cache.content_key(b)  # another directory, another time: same bytes
    assert cache.file_sha256(a) == hashlib.sha256(b'{"x": 1}\n').hexdigest()
    b.write_bytes(b'{"x": 2}\n')
    assert cache.content_key(a) != cache.content_key(b)
    c = tmp_path / "b" / "segments.jsonl.gz"
    c.write_bytes(b'{"x": 1}\n')
    assert cache.content_key(a) != cache.content_key(c)


def test_an_entry_is_there_whole_and_the_first_writer_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    assert cache.entry("k", "abc") is None

    def fail(tmp):
        (tmp / "half").write_text("x")
        raise OSError("disk full")

    assert cache.store("k", "abc", fail) is None
    assert cache.entry("k", "abc") is None and os.listdir(tmp_path / "cache" / "k") == []  # nothing half-written
    made = cache.store("k", "abc", lambda tmp: (tmp / "v").write_text("first"))
    assert made == tmp_path / "cache" / "k" / "abc" and (cache.entry("k", "abc") / "v").read_text() == "first"
    assert cache.store("k", "abc", lambda tmp: (tmp / "v").write_text("second")) == made
    assert (made / "v").read_text() == "first" and os.listdir(tmp_path / "cache" / "k") == ["abc"]


def test_the_newest_used_entries_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "KEPT", 2)
    for i, key in enumerate(["one", "two"]):
        cache.store("k", key, lambda tmp: None)
        os.utime(tmp_path / "cache" / "k" / key, (100 + i, 100 + i))
    assert cache.entry("k", "one") is not None  # used now: newer than "two"
    stale = tmp_path / "cache" / "k" / ".gone.tmp-0123abcd"
    stale.mkdir()
    os.utime(stale, (1, 1))
    cache.store("k", "three", lambda tmp: None)
    assert sorted(os.listdir(tmp_path / "cache" / "k")) == ["one", "three"]  # "two" and the stale write removed


def test_off_keeps_and_takes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, cache.CACHE_OFF)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.store("k", "abc", lambda tmp: (tmp / "v").write_text("x")) is None
    assert cache.entry("k", "abc") is None and not (tmp_path / "segment_balancer").exists()


def test_the_root_is_the_variable_else_the_xdg_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "segment_balancer"
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "mine"))
    assert cache.cache_root() == tmp_path / "mine"
