"""Druid endpoints from Airflow connections, through the Apache Druid provider's hooks.

- Broker (``druid_broker_default``, connection type ``druid``): ``DruidDbApiHook``'s connection:
  host, port, extra ``schema`` (``http``/``https``, default ``http``), login/password (basic auth),
  extra ``ssl_verify_cert``.
- Coordinator (``druid_coordinator_default``, type ``druid`` or ``http``): ``DruidHook``'s
  connection: host, port, the scheme as the provider reads it (the connection's schema field, else
  extra ``schema``, else ``http``), basic auth as ``DruidHook.get_auth`` gives it, TLS verification
  as ``DruidHook.get_verify`` (extra ``ca_bundle_path``).

A host given with its scheme (``https://coordinator``) keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from segment_balancer.tools.capture import DruidEndpoint

BROKER_CONN_ID = "druid_broker_default"
COORDINATOR_CONN_ID = "druid_coordinator_default"


def _url(host: str | None, port: int | None, scheme: str) -> str:
    if not host:
        raise ValueError("the connection has no host")
    if "://" in host:
        base = host.rstrip("/")
    else:
        base = f"{scheme if scheme in ('http', 'https') else 'http'}://{host}"
    return f"{base}:{port}" if port and base.count(":") < 2 else base


def broker_endpoint(conn_id: str = BROKER_CONN_ID) -> DruidEndpoint:
    """The broker of connection ``conn_id`` (``DruidDbApiHook``); raises ``AirflowNotFoundException``
    when the connection does not exist, ``ValueError`` when it has no host."""
    from airflow.providers.apache.druid.hooks.druid import DruidDbApiHook

    from segment_balancer.tools.capture import DruidEndpoint

    conn = DruidDbApiHook(druid_broker_conn_id=conn_id).get_connection(conn_id)
    extra = conn.extra_dejson
    auth = (conn.login, conn.password) if conn.login is not None and conn.password is not None else None
    return DruidEndpoint(
        url=_url(conn.host, conn.port, extra.get("schema", "http")),
        auth=auth,
        verify=extra.get("ssl_verify_cert", True),
    )


def coordinator_endpoint(conn_id: str = COORDINATOR_CONN_ID) -> DruidEndpoint:
    """The Coordinator of connection ``conn_id`` (``DruidHook``); raises as :func:`broker_endpoint`."""
    from airflow.providers.apache.druid.hooks.druid import DruidHook

    from segment_balancer.tools.capture import DruidEndpoint

    hook = DruidHook(druid_ingest_conn_id=conn_id)
    conn = hook.conn
    scheme = hook.get_connection_type
    if scheme not in ("http", "https"):
        scheme = conn.extra_dejson.get("schema", "http")
    auth = hook.get_auth()
    return DruidEndpoint(
        url=_url(conn.host, conn.port, scheme),
        auth=(auth.username, auth.password) if auth is not None else None,
        verify=hook.get_verify(),
    )
