"""A snapshot ``K`` times as large: every datasource, historical, replica and load-queue entry of a
snapshot copied ``K`` times under new names, streamed line by line (the 10M benchmark input:
``segment_balancer generate --segments 10000000`` holds every segment as a Python dict and is
killed for memory on a 24 GiB machine).

Copy ``k`` (0-based) renames datasource ``ds`` to ``ds_rk`` (its rules, its segments'
``dataSource`` and the ``ds_`` prefix of their ids) and historical ``host:port`` to
``host-rk:port`` (its row in ``servers.json``, its replicas, its load queue, its place in
``decommissioningNodes``). The copies share the tiers: each tier has ``K`` times the historicals,
the datasources and the segments of the original (so its plan is not the original's ``K`` times
over: loads and moves choose among every copy's historicals). Usage::

    .venv/bin/python benchmarks/replicate_snapshot.py SNAPSHOT OUT --times 10

``SNAPSHOT`` must use the layout ``generate`` writes (``segments.jsonl.gz``, ``server_segments.json``
with one object per line, ``servers.json``, ``load_queues.json``, ``rules.json``,
``coordinator_config.json``, ``snapshot.json``).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from segment_balancer.common.files import replace_path, sibling_tmp

PREFIX = '{"dataSource":"'


def server_copy(server: str, k: int) -> str:
    host, _, port = server.rpartition(":")
    return f"{host}-r{k}:{port}"


def id_copy(segment_id: str, datasources: list[str], k: int) -> str:
    """``segment_id`` of copy ``k``: its datasource prefix (the longest that matches) renamed."""
    for ds in datasources:
        if segment_id.startswith(ds + "_"):
            return f"{ds}_r{k}{segment_id[len(ds) :]}"
    raise ValueError(f"segment id {segment_id!r} starts with no datasource of the snapshot")


def replicate(src: Path, out: Path, times: int) -> None:
    out.mkdir(parents=True)
    datasources = set()
    with gzip.open(src / "segments.jsonl.gz", "rt") as f:
        for line in f:
            if not line.startswith(PREFIX):
                raise ValueError(f"{src / 'segments.jsonl.gz'}: a line that does not start with {PREFIX!r}")
            datasources.add(line[len(PREFIX) : line.index('"', len(PREFIX))])
    by_length = sorted(datasources, key=len, reverse=True)
    with gzip.open(out / "segments.jsonl.gz", "wt", compresslevel=1) as w:
        for k in range(times):
            with gzip.open(src / "segments.jsonl.gz", "rt") as f:
                for line in f:
                    end = line.index('"', len(PREFIX))
                    w.write(f"{line[:end]}_r{k}{line[end:]}")
    with open(out / "server_segments.json", "w") as w:
        w.write("[\n")
        first = True
        for k in range(times):
            with open(src / "server_segments.json") as f:
                for line in f:
                    line = line.strip().rstrip(",")
                    if line in ("[", "]", ""):
                        continue
                    row = json.loads(line)
                    row = {
                        "server": server_copy(row["server"], k),
                        "segment_id": id_copy(row["segment_id"], by_length, k),
                    }
                    w.write(("" if first else ",\n") + json.dumps(row))
                    first = False
        w.write("\n]\n")
    servers = json.loads((src / "servers.json").read_text())
    copies = []
    for k in range(times):
        for s in servers:
            c = dict(s, server=server_copy(s["server"], k))
            if "host" in c:
                c["host"] = server_copy(s["server"], k).rpartition(":")[0]
            copies.append(c)
    (out / "servers.json").write_text(json.dumps(copies, indent=2))
    queues = json.loads((src / "load_queues.json").read_text())
    (out / "load_queues.json").write_text(
        json.dumps(
            {
                server_copy(server, k): {
                    kind: [
                        id_copy(e, by_length, k)
                        if isinstance(e, str)
                        else dict(e, segment_id=id_copy(e["segment_id"], by_length, k))
                        for e in entries
                    ]
                    for kind, entries in queue.items()
                }
                for k in range(times)
                for server, queue in queues.items()
            },
            indent=2,
        )
    )
    rules = json.loads((src / "rules.json").read_text())
    (out / "rules.json").write_text(
        json.dumps(
            {(f"{ds}_r{k}" if ds in datasources else ds): r for k in range(times) for ds, r in rules.items()}, indent=2
        )
    )
    config = json.loads((src / "coordinator_config.json").read_text())
    if config.get("decommissioningNodes"):
        config["decommissioningNodes"] = [
            server_copy(s, k) for k in range(times) for s in config["decommissioningNodes"]
        ]
    (out / "coordinator_config.json").write_text(json.dumps(config, indent=2))
    meta = json.loads((src / "snapshot.json").read_text())
    meta["cluster"] = f"{meta.get('cluster', 'cluster')}-x{times}"
    (out / "snapshot.json").write_text(json.dumps(meta, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", type=Path)
    parser.add_argument("out", type=Path, help="the directory to write (must not exist)")
    parser.add_argument("--times", type=int, default=10)
    args = parser.parse_args()
    tmp = sibling_tmp(args.out)
    replicate(args.snapshot, tmp, args.times)
    replace_path(tmp, args.out)


if __name__ == "__main__":
    main()
