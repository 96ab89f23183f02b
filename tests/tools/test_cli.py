"""``python -m segment_balancer`` (segment_balancer.tools.cli): what a user's bad input gives."""

from __future__ import annotations

import json

from druid_sample_plan import SNAPSHOT

from segment_balancer.tools import cli


def test_an_unknown_key_of_the_config_file_is_refused_naming_the_file_before_spark(tmp_path, capsys, monkeypatch):
    """The user's own ``--config`` stays strict (issue 27): exit 2, one line naming the file, the
    key and the closest known key; no Spark session is started and nothing is written."""
    import segment_balancer.spark.session as session

    monkeypatch.setattr(session, "local_session", lambda *a, **k: (_ for _ in ()).throw(AssertionError("Spark started")))
    bad = tmp_path / "overrides.json"
    bad.write_text(json.dumps({"balancingMinCostReductionPct": 5}))
    code = cli.main(["plan", "--snapshot", str(SNAPSHOT), "--out", str(tmp_path / "plan"), "--config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == (f"error: --config {bad}: unknown key 'balancingMinCostReductionPct' "
                           "(did you mean 'balancingMinCostReductionPercent'?)")
    assert not (tmp_path / "plan").exists()
