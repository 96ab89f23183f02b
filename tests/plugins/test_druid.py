"""Druid endpoints from Airflow connections, read through the Druid provider's hooks."""

from __future__ import annotations

import json

import pytest

from segment_balancer_airflow.druid import broker_endpoint, coordinator_endpoint


def conn(monkeypatch, conn_id: str, **fields):
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_default_connections_plain_http(monkeypatch):
    conn(monkeypatch, "druid_broker_default", conn_type="druid", host="broker.example", port=8082)
    conn(monkeypatch, "druid_coordinator_default", conn_type="http", host="coord.example", port=8081)
    broker, coordinator = broker_endpoint(), coordinator_endpoint()
    assert (broker.url, broker.auth, broker.verify) == ("http://broker.example:8082", None, True)
    assert (coordinator.url, coordinator.auth, coordinator.verify) == ("http://coord.example:8081", None, True)


def test_https_basic_auth_and_tls_options(monkeypatch):
    conn(
        monkeypatch,
        "b",
        conn_type="druid",
        host="broker",
        port=8282,
        login="ops",
        password="s3cret",
        extra={"schema": "https", "ssl_verify_cert": False},
    )
    conn(
        monkeypatch,
        "c",
        conn_type="druid",
        host="https://coord",
        port=8281,
        login="ops",
        password="s3cret",
        extra={"ca_bundle_path": "/etc/ca.pem"},
    )
    broker, coordinator = broker_endpoint("b"), coordinator_endpoint("c")
    assert (broker.url, broker.auth, broker.verify) == ("https://broker:8282", ("ops", "s3cret"), False)
    # DruidHook verifies TLS unless told otherwise (its verify_ssl); the CA bundle applies only then.
    assert (coordinator.url, coordinator.auth, coordinator.verify) == ("https://coord:8281", ("ops", "s3cret"), True)


def test_a_missing_connection_names_itself(monkeypatch):
    from airflow.exceptions import AirflowNotFoundException

    with pytest.raises(AirflowNotFoundException, match="druid_nowhere"):
        broker_endpoint("druid_nowhere")
