"""Greedy kernels of the loading stages 1–4 and their revisits (stages 6 and 8).

Each kernel is a plain function over rows of one (segment, tier) pair, visited in segment index
order, and the :class:`~segment_balancer.engine.state.ServerHolder` objects of the servers it may
load on. A row is a dict with:

``idx`` (int), ``segment_id``, ``datasource`` (str), ``size_bytes`` (int), ``tier`` (str),
``target`` (int, ``target(s, T)``), ``count`` (int, ``count(s, T)``), ``present`` (set[str]: servers
of the tier that serve the segment or are loading it — never a destination), ``ranking`` (list[str]:
the tier's candidate servers ranked best first by the start-of-run placement cost) and ``b`` (int:
top ``B``). Kernels write LOADs and group memberships to an :class:`OpSink`.

Source: seed 000 stages 1–4 and 6; ALGORITHM.md "Stages" 1–4 and 6.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .state import OpSink, ServerHolder, StageLimit, group_name


def _best_loadable(row: dict, servers: Mapping[str, ServerHolder], limit: StageLimit) -> ServerHolder | None:
    """The best-ranked server of the row's top ``B`` that does not hold it and passes the limits."""
    for name in row["ranking"][: row["b"]]:
        if name in row["present"]:
            continue
        server = servers.get(name)
        if server is not None and server.can_load(int(row["size_bytes"]), limit):
            return server
    return None


def primary_tier_order(rows: Iterable[dict]) -> list[dict]:
    """Order the tiers of one unreplicated segment: primary first (ALGORITHM.md stage 1).

    ``rows``: the segment's rows with ``target > 0``, each also carrying ``tier_priority`` (the
    highest server priority in the tier) and ``tier_pos`` (the tier's position in the rule's
    ``tieredReplicants``). Highest priority first, then larger target, then rule order.
    """
    return sorted(rows, key=lambda r: (-int(r["tier_priority"]), -int(r["target"]), int(r["tier_pos"])))


def load_unreplicated(segments: Iterable[list[dict]], servers: Mapping[str, ServerHolder],
                      limit: StageLimit, sink: OpSink, stage: int) -> None:
    """Stage 1 (and its revisit): one load per unreplicated segment, primary tier first.

    ``segments``: per segment, in index order, its rows for every tier with ``target > 0``.
    Groups written: ``ToBecomeFullyReplicated[T]`` (loaded tier, target 1),
    ``ToBecomeUnderreplicated[T]`` (other tiers, and the loaded tier if its target > 1),
    ``StillUnreplicated``.
    """
    for rows in segments:
        ordered = primary_tier_order(rows)
        loaded_tier = None
        for row in ordered:
            server = _best_loadable(row, servers, limit)
            if server is not None:
                sink.load(row, server, "loading", "unreplicated", (int(row["idx"]), "", sink.next_seq()))
                loaded_tier = row["tier"]
                break
        idx = int(ordered[0]["idx"])
        if loaded_tier is None:
            sink.member(idx, "StillUnreplicated")
            continue
        for row in ordered:
            full = row["tier"] == loaded_tier and int(row["target"]) == 1
            sink.member(idx, group_name("ToBecomeFullyReplicated" if full else "ToBecomeUnderreplicated", row["tier"]))


def load_underreplicated(rows: Iterable[dict], servers: Mapping[str, ServerHolder], limit: StageLimit,
                         sink: OpSink, still_group: str, reason: str) -> list[tuple[dict, str]]:
    """Stages 3 and 4 (and their revisits) in one tier: load up to the target from top ``B``.

    ``rows``: the tier's rows in index order. Loads go to non-holding servers of top ``B``, best
    first, until ``count = target`` or no server passes. Groups written:
    ``ToBecomeFullyReplicated[T]`` or ``still_group[T]`` (``StillUnderreplicated`` for stage 3,
    ``ToBecomeUnderreplicated`` for stage 4). Returns the (row, server) of every load, for the
    stage-3 callbacks.
    """
    loads = []
    for row in rows:
        count, target = int(row["count"]), int(row["target"])
        present = set(row["present"])
        for name in row["ranking"][: row["b"]]:
            if count >= target:
                break
            if name in present:
                continue
            server = servers.get(name)
            if server is None or not server.can_load(int(row["size_bytes"]), limit):
                continue
            sink.load(row, server, "loading", reason, (int(row["idx"]), row["tier"], float(sink.next_seq())))
            loads.append((row, name))
            present.add(name)
            count += 1
        kind = "ToBecomeFullyReplicated" if count >= target else still_group
        sink.member(int(row["idx"]), group_name(kind, row["tier"]))
    return loads


def load_underbroadcast(rows: Iterable[dict], servers: Mapping[str, ServerHolder], limit: StageLimit,
                        sink: OpSink) -> None:
    """Stage 2 (and its revisit) in one tier: load a broadcast segment on every server that lacks it.

    ``rows``: the tier's rows in index order; ``row["should"]`` lists the servers of the tier that
    should hold the segment (every historical except decommissioning servers that hold only
    broadcast segments), visited in name order. Groups written: ``ToBecomeFullyBroadcast[T]``,
    ``StillUnderbroadcast[T]``.
    """
    for row in rows:
        present = set(row["present"])
        missing = 0
        for name in sorted(row["should"]):
            if name in present:
                continue
            server = servers.get(name)
            if server is not None and server.can_load(int(row["size_bytes"]), limit):
                sink.load(row, server, "loading", "underbroadcast", (int(row["idx"]), row["tier"], float(sink.next_seq())))
                present.add(name)
            else:
                missing += 1
        kind = "StillUnderbroadcast" if missing else "ToBecomeFullyBroadcast"
        sink.member(int(row["idx"]), group_name(kind, row["tier"]))


def move_from_decommissioning(rows: Iterable[dict], servers: Mapping[str, ServerHolder], limit: StageLimit,
                              sink: OpSink) -> None:
    """Stages 5 and 9 in one tier: move replicas away from decommissioning servers.

    ``rows``: the tier's rows in index order; ``row["decommissioning_holders"]`` lists the
    decommissioning servers that serve the segment with no drop of it (sources, visited in name
    order). A source gets a move — a ``decommissioning`` LOAD on the best-ranked server of top
    ``B`` that does not hold the segment and passes the limits, and a DROP on the source that
    depends on it — only while the tier needs the replica: once ``count`` minus the replicas still
    on decommissioning servers reaches ``target``, the remaining sources are excess, left for stage
    12 to drop. Groups written: ``ToBecomeNotLoadedOnDecommServers[T]`` (every source moved or
    excess), ``StillLoadedOnDecommServers[T]``.
    """
    for row in rows:
        present = set(row["present"])
        sources = sorted(row["decommissioning_holders"])
        on_decommissioning, count, target = len(sources), int(row["count"]), int(row["target"])
        left = 0
        for source in sources:
            if count - on_decommissioning >= target:
                break  # excess: the tier holds its target without the rest
            probe = dict(row, present=present)
            dest = _best_loadable(probe, servers, limit)
            if dest is None:
                left += 1
                continue
            seq = float(sink.next_seq())
            sink.load(row, dest, "decommissioning", "decommissioning", (int(row["idx"]), row["tier"], seq))
            sink.drop(row, source, row["tier"], "decommissioning", (int(row["idx"]), row["tier"], seq + 0.5),
                      dep_server=dest.server)
            present.add(dest.server)
            on_decommissioning -= 1
        kind = "StillLoadedOnDecommServers" if left else "ToBecomeNotLoadedOnDecommServers"
        sink.member(int(row["idx"]), group_name(kind, row["tier"]))
