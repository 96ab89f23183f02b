"""Group bookkeeping shared by the stage modules."""

from __future__ import annotations

from segment_balancer.planner.kernels.state import group_name, split_group_name


def copy_groups(groups, src_kind: str, dst_kind: str) -> None:
    """Every group ``src_kind[T]`` (or ``src_kind``) copied to ``dst_kind[T]``: a stage starts its
    working group from the start-of-run one."""
    for name in [n for n in groups if split_group_name(n)[0] == src_kind]:
        groups[group_name(dst_kind, split_group_name(name)[1])] = groups[name].copy()
