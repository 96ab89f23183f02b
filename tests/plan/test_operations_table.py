"""The files of a report's table of operations, and its per-historical summary, on a plan of six
operations worked by hand: a move of ``a`` from h1 to h2 (load 0, drop 1 after it), a load of ``b``
on h1, a drop of ``c`` from h3, a load of ``d`` on h3 cancelled."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest

from segment_balancer.plan import operations_table as ot
from segment_balancer.plan.validation import _REQUIRED

OPERATION_COLUMNS = _REQUIRED["operations"]

MIB = 2**20


def plan_dir(tmp_path, rows):
    columns = [c for c in OPERATION_COLUMNS if c != "queue_type"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["queue_type"] = None
    frame["depends_on"] = frame["depends_on"].astype("float64")
    frame.to_parquet(tmp_path / "operations.parquet")
    return tmp_path


ROWS = [
    (1, 7, "DROP", "a", "wiki", "hot", "h1", 3 * MIB, 0, "balancing"),
    (0, 7, "LOAD", "a", "wiki", "hot", "h2", 3 * MIB, None, "balancing"),
    (2, 1, "LOAD", "b", "koala", "hot", "h1", 1 * MIB, None, "unreplicated"),
    (3, 12, "DROP", "c", "wiki", "cold", "h3", 5 * MIB, None, "overreplicated"),
    (4, 12, "LOAD", "d", "wiki", "cold", "h3", 2 * MIB, None, "underreplicated"),
    (5, 12, "CANCEL", "d", "wiki", "cold", "h3", 2 * MIB, None, "underreplicated"),
]


def load_script(path, call):
    text = path.read_text()
    assert text.startswith(f"sbOperations.{call}(") and text.endswith(");\n")
    return json.loads(f"[{text[len(call) + 14 : -3]}]")


def decode(b64, dtype):
    return np.frombuffer(base64.b64decode(b64), dtype=np.dtype(dtype).newbyteorder("<")).tolist()


def test_the_per_historical_summary_by_hand(tmp_path):
    summary = ot.server_summary(ot.read_operations(plan_dir(tmp_path, ROWS)))
    assert summary.to_dict("records") == [
        {
            "tier": "cold",
            "server": "h3",
            "loads": 1,
            "drops": 1,
            "cancels": 1,
            "moves_in": 0,
            "moves_out": 0,
            "bytes_in": 2 * MIB,
            "bytes_out": 5 * MIB,
        },
        {
            "tier": "hot",
            "server": "h1",
            "loads": 1,
            "drops": 1,
            "cancels": 0,
            "moves_in": 0,
            "moves_out": 1,
            "bytes_in": 1 * MIB,
            "bytes_out": 3 * MIB,
        },
        {
            "tier": "hot",
            "server": "h2",
            "loads": 1,
            "drops": 0,
            "cancels": 0,
            "moves_in": 1,
            "moves_out": 0,
            "bytes_in": 3 * MIB,
            "bytes_out": 0,
        },
    ]
    assert ot.server_summary(ot.read_operations(plan_dir(tmp_path, []))).empty


def test_the_index_codes_every_operation_in_op_id_order(tmp_path):
    plan = plan_dir(tmp_path, ROWS)
    ot.write_operations_table(plan)
    [payload] = load_script(plan / "operations" / "index.js", "index")
    assert payload["count"] == 6 and payload["chunk"] == ot.ROWS_PER_CHUNK
    columns = payload["columns"]
    assert list(columns) == list(ot.CODED)
    # stages read as their names, in the stages' order (12 after 7, not before as text would sort)
    assert columns["stage"]["values"] == ["1 unreplicated", "7 balancing", "12 unload"]
    values = {name: [c["values"][k] for k in decode(c["codes"], c["type"])] for name, c in columns.items()}
    assert values["action"] == ["LOAD", "DROP", "LOAD", "DROP", "LOAD", "CANCEL"]
    assert values["server"] == ["h2", "h1", "h1", "h3", "h3", "h3"]
    assert values["stage"] == ["7 balancing", "7 balancing", "1 unreplicated", "12 unload", "12 unload", "12 unload"]
    assert decode(payload["op_id"], np.int32) == [0, 1, 2, 3, 4, 5]
    assert decode(payload["size_mib"], np.float32) == [3.0, 3.0, 1.0, 5.0, 2.0, 2.0]
    assert decode(payload["depends_on"], np.int32) == [-1, 0, -1, -1, -1, -1]
    assert load_script(plan / "operations" / "rows-00000.js", "rows") == [0, ["a", "a", "b", "c", "d", "d"]]


def test_segment_ids_are_split_into_chunks_and_a_new_table_replaces_the_old(tmp_path, monkeypatch):
    monkeypatch.setattr(ot, "ROWS_PER_CHUNK", 4)
    plan = plan_dir(tmp_path, ROWS)
    (plan / "operations").mkdir()
    (plan / "operations" / "rows-00009.js").write_text("left from an earlier report")
    ot.write_operations_table(plan)
    assert sorted(p.name for p in (plan / "operations").iterdir()) == ["index.js", "rows-00000.js", "rows-00001.js"]
    assert load_script(plan / "operations" / "rows-00001.js", "rows") == [1, ["d", "d"]]
    assert not [p for p in plan.iterdir() if p.name.startswith(".")]


def test_druid_plans_read_their_duties(tmp_path):
    plan = plan_dir(tmp_path, [(0, 6, "LOAD", "a", "wiki", "hot", "h2", MIB, None, "balance")])
    ot.write_operations_table(plan, "druid")
    [payload] = load_script(plan / "operations" / "index.js", "index")
    assert payload["columns"]["stage"]["values"] == ["6 BalanceSegments"]


def test_a_plan_without_operations_parquet_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        ot.write_operations_table(tmp_path)
