"""The hand-worked plan of the bundled ``druid_sample`` snapshot (derivation in test_pipeline.py)."""

from pathlib import Path

SNAPSHOT = Path(__file__).resolve().parents[1] / "include/segment_balancer/snapshots/druid_sample"
TW = {d: f"twitterstream_2013-01-0{d}T00:00:00.000Z_2013-01-0{d + 1}T00:00:00.000Z" for d in (1, 2, 3)}


def short(segment_id: str) -> str:
    for key, prefix in (("tw01", TW[1]), ("tw02", TW[2]), ("tw03", TW[3])):
        if segment_id.startswith(prefix):
            return key
    return "ed" if segment_id.startswith("wikipedia_editstream") else "wk"


def server(name: str) -> str:
    return name.replace("hist-default-0", "d").replace("hist-hot-0", "h").replace(":8083", "")


def rows(ops, stages):
    part = ops[ops.stage.isin(stages)]
    return [(int(r.stage), r.action, r.queue_type, short(r.segment_id), server(r.server)) for r in part.itertuples()]


# Stages 1-5 (stage 12 depends on which twitterstream day stage 7 moves in hot: see test_pipeline).
EXPECTED_STAGES_1_TO_5 = [
    (1, "LOAD", "loading", "tw03", "h2"),
    (3, "LOAD", "loading", "ed", "d3"),
    (4, "LOAD", "loading", "tw03", "d3"),
    (5, "LOAD", "decommissioning", "ed", "d2"),
    (5, "DROP", None, "ed", "d1"),
]
