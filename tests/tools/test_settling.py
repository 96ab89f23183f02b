"""Plans that settle: ``druid_sample`` simulated for five Coordinator runs, every
operation completing, has no operation from run 3 on.

Worked by hand from ALGORITHM.md (the snapshot and run 1 are ``tests/test_pipeline.py``'s; tw =
twitterstream day 01/02/03, one day each, ed = the editstream segment overlapping them all):

* Run 1, 8 operations: tw03 → h2 (stage 1), ed → d3 (3), tw03 → d3 (4), ed d1 → d2 (5, a move),
  tw01 h1 → h2 (7, a move), tw01 dropped from the decommissioning d1 (12).
* Run 2, 2 operations: _default_tier now has d2 {tw01, tw02, wk, ed} and d3 {ed, tw03, wk}. tw01
  costs J(tw01, tw02) + J(tw01, ed) on d2 and J(tw01, tw03) + J(tw01, ed) on d3, where the
  neighbour two days away costs a quarter of the adjacent one: d3 is strictly cheaper → move
  tw01 d2 → d3. Every other drawn segment is where it costs least (tw02, alone with ed on d2;
  tw03 beside tw01 two days away rather than tw02 adjacent).
* Run 3 on: d2 {tw02, wk, ed}, d3 {ed, tw03, tw01, wk}; hot h1 {tw02}, h2 {tw01, tw03}. Each
  holder costs no more than the other server (tw02 would sit beside two adjacent days; tw01 and
  tw03 beside a day two away rather than an adjacent one; ties never move): nothing to do.
"""

from __future__ import annotations

import pandas as pd
from druid_sample_plan import SNAPSHOT, server, short

from segment_balancer.tools.simulate import simulate


def test_druid_sample_settles_from_run_3_on(spark, tmp_path):
    runs = simulate(spark, SNAPSHOT, tmp_path / "sim", 5)
    assert runs["operations"].tolist() == [8, 2, 0, 0, 0]
    assert runs["balancing_moves"].tolist() == [1, 1, 0, 0, 0]
    ops = pd.read_parquet(tmp_path / "sim" / "run-002" / "plan" / "operations.parquet")
    assert [(int(r.stage), r.action, short(r.segment_id), server(r.server)) for r in ops.itertuples()] == [
        (7, "LOAD", "tw01", "d3"),
        (7, "DROP", "tw01", "d2"),
    ]
