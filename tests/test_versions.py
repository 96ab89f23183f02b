"""The pinned stack is coherent: pyspark's Python side, both distributions writing into ``pyspark/``
(``pyspark`` and ``pyspark-client``, which the Spark provider depends on) and the JVM agree, and
pandas is 2.x (chosen on purpose, see requirements.txt)."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(name: str) -> str:
    pins = dict(
        (_canonical(m.group(1)), m.group(2))
        for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)$", REQUIREMENTS.read_text(), re.MULTILINE)
    )
    assert _canonical(name) in pins, f"{name} is not pinned in requirements.txt"
    return pins[_canonical(name)]


def test_pyspark_python_side_and_distributions_agree():
    import pyspark

    assert pyspark.__version__ == version("pyspark") == version("pyspark-client") == pinned("pyspark")
    assert pinned("pyspark-client") == pinned("pyspark")


def test_pyspark_jars_match_the_python_side():
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    cores = sorted(p.name for p in jars.glob("spark-core_*.jar"))
    assert cores, f"no spark-core jar under {jars}: pyspark-client overwrote pyspark? re-run `make venv`"
    assert all(name.endswith(f"-{pyspark.__version__}.jar") for name in cores), cores


def test_jvm_spark_version_matches(spark):
    import pyspark

    assert spark.version == pyspark.__version__


def test_pandas_is_2x():
    import pandas

    assert pandas.__version__.startswith("2."), pandas.__version__
    assert pandas.__version__ == pinned("pandas")


@pytest.mark.parametrize(
    "dist",
    ["apache-airflow", "apache-airflow-providers-apache-spark", "great-expectations", "pyroaring", "pyarrow"],
)
def test_installed_versions_are_the_pinned_ones(dist):
    assert version(dist) == pinned(dist)
