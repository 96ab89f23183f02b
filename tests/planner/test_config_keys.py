"""The config keys' one declaration (``planner.config_keys``): the trigger form's fields and the
config parser accept and refuse the same values, at and around every bound; the docs' table, the
CLI help and ``as_dict`` come from it."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from segment_balancer.druid.snapshot.errors import SnapshotError
from segment_balancer.planner.config import build_config
from segment_balancer.planner.config_keys import BY_NAME, FORM_KEYS, INT32, KEYS, Key, markdown_table
from segment_balancer_airflow.params import CONFIG_KEYS

REPO = Path(__file__).resolve().parents[2]


def probes(key: Key) -> list:
    """Values at, just inside and just outside every bound of ``key``, and of other JSON types."""
    values: list = [None, True, [], {}] + ([] if key.type == "array" else ["text"])
    if key.type in ("integer", "number"):
        step = 1 if key.type == "integer" else 0.5
        for bound in (key.minimum, key.maximum, key.exclusive_minimum, key.exclusive_maximum):
            if bound is not None:
                values += [bound - step, bound, bound + step]
        values += [0, 1, 50, 99.5, 100, 1.5, -1, 3_000_000_000, 2**63]
    if key.choices:
        values += [*key.choices, key.choices[0].lower() + "x"]
    if key.type == "array":
        values += [["h1:8083"], ["h1:8083", "h2:8083"], [1]]
    return values


def form_accepts(key: Key, value) -> bool:
    try:
        jsonschema.validate(value, CONFIG_KEYS[key.name])
    except jsonschema.ValidationError:
        return False
    return True


def config_accepts(key: Key, value) -> bool:
    given = {key.name: value}
    # a constraint across keys is probed apart (below): keep the other key out of the way
    if key.name == "avgShedderLowThresholdPercent":
        given["avgShedderHighThresholdPercent"] = 100
    if key.name == "avgShedderHighThresholdPercent":
        given["avgShedderLowThresholdPercent"] = 1e-9
    try:
        build_config({}, given)
    except SnapshotError as exc:
        assert key.name in str(exc), exc  # every refusal names the key
        return False
    return True


@pytest.mark.parametrize("key", FORM_KEYS, ids=[k.name for k in FORM_KEYS])
def test_the_form_and_the_config_agree_at_and_around_every_bound(key):
    disagree = [
        (v, form_accepts(key, v), config_accepts(key, v))
        for v in probes(key)
        if form_accepts(key, v) != config_accepts(key, v)
    ]
    assert disagree == [], f"{key.name}: (value, form, config) that disagree"


def test_a_list_of_server_names_is_a_list_in_the_form_and_may_be_druids_string_in_a_file():
    """The form edits a list, one server name per line; ``coordinator_config.json`` may write the
    list as Druid's comma-separated string (``parseJsonStringOrArray``), which the config reads."""
    nodes = BY_NAME["decommissioningNodes"]
    assert not form_accepts(nodes, "h1:8083,h2:8083") and form_accepts(nodes, ["h1:8083", "h2:8083"])
    assert build_config({"decommissioningNodes": "h1:8083, h2:8083"}).decommissioning_nodes == ("h1:8083", "h2:8083")
    assert "comma-separated" in nodes.meaning


def test_the_probes_that_were_found_to_disagree_are_decided():
    """A log base of 0.5 was refused by the form and accepted by the config; a queue of three
    billion segments accepted by the form and refused by the config when the run started."""
    base, queue = BY_NAME["numBestServersChoosingFunctionDefaultLogBase"], BY_NAME["maxSegmentsInNodeLoadingQueue"]
    assert not form_accepts(base, 0.5) and not config_accepts(base, 0.5)
    assert not form_accepts(queue, 3_000_000_000) and not config_accepts(queue, 3_000_000_000)
    assert form_accepts(queue, INT32) and config_accepts(queue, INT32)


@pytest.mark.parametrize(
    "given, names",
    [
        (
            {"avgShedderLowThresholdPercent": 30, "avgShedderHighThresholdPercent": 20},
            ("avgShedderHighThresholdPercent", "avgShedderLowThresholdPercent"),
        ),
        (
            {"balancingIterationWindow": 10, "balancingFailedIterationThreshold": 11},
            ("balancingFailedIterationThreshold", "balancingIterationWindow"),
        ),
        (
            {"loadingMinPercent": 70, "decommissioningMinPercent": 10, "balancingMinPercent": 30},
            ("loadingMinPercent", "decommissioningMinPercent", "balancingMinPercent"),
        ),
    ],
)
def test_a_constraint_across_keys_is_stated_in_the_form_and_refused_naming_both(given, names):
    with pytest.raises(SnapshotError) as info:
        build_config({}, given)
    assert all(name in str(info.value) for name in names), info.value
    for name in names:
        others = [n for n in names if n != name]
        if name in CONFIG_KEYS:  # the form's description states it
            assert any(o in CONFIG_KEYS[name]["description"] for o in others), (name, others)


def test_every_key_the_parser_knows_is_declared_and_as_dict_follows_the_declaration():
    values = build_config({}).as_dict()
    assert [k for k in values if k not in ("ignored", "derived")] == [k.name for k in KEYS if "." not in k.name]
    for key in KEYS:
        if key.name in values:
            expected = key.default
            assert values[key.name] == expected, key.name
    assert set(CONFIG_KEYS) == {k.name for k in FORM_KEYS}


def test_the_docs_table_is_the_declaration():
    text = (REPO / "docs" / "CONFIGURATION.md").read_text()
    assert text.endswith(markdown_table()), "docs/CONFIGURATION.md: regenerate the table from config_keys"


def test_the_cli_help_lists_every_key(capsys):
    from segment_balancer.tools.cli import main

    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    for key in KEYS:
        assert f"  {key.name}: {key.type}, default" in out, key.name
