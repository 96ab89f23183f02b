"""Segment groups as roaring bitmaps over the used-segment index, and their XCom form.

A group is a ``pyroaring.BitMap`` of segment indexes (ALGORITHM.md "Terms": a segment's position in
the newest-first order of used segments). XCom carries ``{name: base64(portable serialisation)}``.
Source: seed 000 "Implementation notes" (bitsets over ``usedSegments``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from pyroaring import BitMap


def encode(bitmap: BitMap) -> str:
    """Base64 text of the portable roaring serialisation of the bitmap rebuilt from its members (run
    containers where they are smaller): the same members give the same text, however the bitmap
    was built."""
    return base64.b64encode(BitMap(bitmap.to_array()).serialize()).decode("ascii")


def decode(text: str) -> BitMap:
    """Inverse of :func:`encode`; raises ``ValueError`` on text that is not a roaring bitmap."""
    try:
        return BitMap.deserialize(base64.b64decode(text.encode("ascii"), validate=True))
    except Exception as exc:  # pyroaring raises plain ValueError/TypeError
        raise ValueError(f"not a base64 roaring bitmap: {exc}") from exc


def encode_all(groups: Mapping[str, BitMap]) -> dict[str, str]:
    """``{name: encode(bitmap)}`` sorted by name."""
    return {name: encode(groups[name]) for name in sorted(groups)}


def decode_all(encoded: Mapping[str, str]) -> dict[str, BitMap]:
    """Inverse of :func:`encode_all`."""
    return {name: decode(text) for name, text in encoded.items()}


def group_name(kind: str, tier: str | None = None) -> str:
    """``Kind[tier]`` for per-tier groups, ``Kind`` for global ones."""
    return f"{kind}[{tier}]" if tier is not None else kind


def split_group_name(name: str) -> tuple[str, str | None]:
    """Inverse of :func:`group_name`."""
    if name.endswith("]") and "[" in name:
        kind, tier = name[:-1].split("[", 1)
        return kind, tier
    return name, None


def copy_groups(groups, src_kind: str, dst_kind: str) -> None:
    """Every group ``src_kind[T]`` (or ``src_kind``) copied to ``dst_kind[T]``: a stage starts its
    working group from the start-of-run one."""
    for name in [n for n in groups if split_group_name(n)[0] == src_kind]:
        groups[group_name(dst_kind, split_group_name(name)[1])] = groups[name].copy()


def tier_groups(groups, kind: str) -> dict[str, BitMap]:
    """``{tier: bitmap}`` of the non-empty per-tier groups of ``kind``."""
    out = {}
    for name, bm in groups.items():
        k, tier = split_group_name(name)
        if k == kind and tier is not None and len(bm):
            out[tier] = bm
    return dict(sorted(out.items()))


def packed(bitmaps: dict[str, BitMap]) -> dict[str, bytes]:
    """Bitmaps serialized for a task's closure."""
    return {k: v.serialize() for k, v in bitmaps.items()}


def unpacked(data: dict[str, bytes]) -> dict[str, BitMap]:
    """Inverse of :func:`packed`."""
    return {k: BitMap.deserialize(v) for k, v in data.items()}


def merge(groups, result: dict[str, BitMap], replaced) -> None:
    """Groups ``replaced`` take their new members from ``result`` (empty when absent); the other
    groups of ``result`` grow."""
    result = dict(result)
    for name in replaced:
        groups[name] = result.pop(name, BitMap())
    for name, bm in result.items():
        groups[name] = groups.get(name, BitMap()) | bm
