"""No credential is ever written: Druid's password, and the basic-auth header made from
it, appear in no log line, no XCom, no file of a captured snapshot and no file of a plan made from
it, when the Coordinator asked is not the leader and redirects (``tools/capture.py``). Found by
grepping everything each way of running writes."""

from __future__ import annotations

import base64
import gzip
import json
import logging
from pathlib import Path

import fake_druid as fd

USER, PASSWORD = "druid_admin", "Pw-9c1f2e-secret"
SECRETS = (PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(), f"{USER}:{PASSWORD}")
REPO = Path(__file__).resolve().parents[1]


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def files_leaking(root: Path) -> list[str]:
    """Files under ``root`` holding a secret (``.gz`` read decompressed)."""
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        if any(s.encode() in data for s in SECRETS):
            out.append(str(path))
    return out


def test_the_cli_capture_and_plan_write_no_credential(spark, tmp_path, capsys, caplog, monkeypatch):
    from segment_balancer.tools.cli import main

    caplog.set_level(logging.DEBUG)  # urllib3's request lines too
    monkeypatch.setenv("DRUID_PASSWORD", PASSWORD)
    auth = (USER, PASSWORD)
    with fd.fake_druid(auth=auth) as leader, fd.fake_druid(auth=auth) as follower, fd.fake_druid(auth=auth) as broker:
        follower.redirect_to, follower.leader = leader.url, leader.url
        snap = tmp_path / "snap"
        assert (
            main(
                [
                    "capture",
                    "--coordinator",
                    follower.url,
                    "--broker",
                    broker.url,
                    "--out",
                    str(snap),
                    "--cluster",
                    "prod",
                    "--user",
                    USER,
                ]
            )
            == 0
        )
        assert any(a == fd._basic(*auth) for a in leader.authorizations)  # it did send them, to the leader
    assert (
        main(["plan", "--snapshot", str(snap), "--out", str(tmp_path / "plan"), "--work", str(tmp_path / "work")]) == 0
    )
    out = capsys.readouterr()
    assert "redirected to" in caplog.text
    assert leaks(caplog.text + out.out + out.err) == []
    assert files_leaking(tmp_path) == []


def test_the_capture_dag_writes_no_credential_to_its_log_or_xcom(airflow_home, tmp_path, capfd, caplog, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    caplog.set_level(logging.DEBUG)
    auth = (USER, PASSWORD)
    root = tmp_path / "snapshots"
    with fd.fake_druid(auth=auth) as leader, fd.fake_druid(auth=auth) as follower, fd.fake_druid(auth=auth) as broker:
        follower.redirect_to, follower.leader = leader.url, leader.url
        for conn_id, conn_type, fake in (
            ("DRUID_BROKER_DEFAULT", "druid", broker),
            ("DRUID_COORDINATOR_DEFAULT", "http", follower),
        ):
            host, port = fake.url.split("//")[1].split(":")
            monkeypatch.setenv(
                f"AIRFLOW_CONN_{conn_id}",
                json.dumps(
                    {"conn_type": conn_type, "host": host, "port": int(port), "login": USER, "password": PASSWORD}
                ),
            )
        run = (
            DagBag(dag_folder=str(REPO / "dags"))
            .dags["druid_snapshot_capture"]
            .test(run_conf={"snapshots_root": str(root), "cluster": "prod"})
        )
    assert run.state == "success"
    with create_session() as session:
        xcoms = [
            json.dumps(x.value, default=str)
            for x in session.query(XComModel).filter(XComModel.run_id == run.run_id).all()
        ]
    assert xcoms and leaks("\n".join(xcoms)) == []
    out = capfd.readouterr()
    logged = out.out + out.err + caplog.text
    assert "redirected to" in logged
    assert leaks(logged) == []
    assert files_leaking(root) == [] and files_leaking(airflow_home / "logs") == []
