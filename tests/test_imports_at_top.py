"""Imports stand at the top of their module. An import inside a function (of ``include/``,
``plugins/``, ``dags/``, ``spark_apps/``) is allowed only where :data:`LAZY` lists it: the module's
path, the module imported and the class of its reason, one of :data:`REASONS`."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREES = ("include", "plugins", "dags", "spark_apps")

REASONS = {
    "dag_parse": "Airflow's parse imports the module (the DAG files, the plugin package, what they import at the "
    "top): no Spark, pandas, pyarrow, numpy or planner engine there, nor what only a task needs",
    "cycle": "the import breaks a circle between modules",
    "heavy_optional": "a library or module the function alone needs would make a common start measurably slower "
    "(the CLI's, the Connect server's commands)",
    "before_import": "code must run before the import (the environment, sys.modules)",
}

# {module's path: {module imported (it and its submodules): reason class}}
LAZY = {
    # the DAG files: a task imports at run time what the parse does not load
    "dags/segment_balancing.py": {
        "segment_balancer.spark.apps": "dag_parse",
        "segment_balancer.plan.compare": "dag_parse",
        "segment_balancer.plan.validation": "dag_parse",
        "segment_balancer.plan.publish": "dag_parse",
        "segment_balancer_airflow.resolve": "dag_parse",
        "segment_balancer_airflow.retention": "dag_parse",
    },
    "dags/segment_balancer_retention.py": {
        "segment_balancer.plan.retention": "dag_parse",
        "segment_balancer_airflow.branches": "dag_parse",
        "segment_balancer_airflow.resolve": "dag_parse",
        "segment_balancer_airflow.retention": "dag_parse",
    },
    "dags/druid_snapshot_capture.py": {"segment_balancer.tools.capture": "dag_parse"},
    # the plugin package, imported by the DAG files and the plugin at parse time
    "plugins/segment_balancer_airflow/assets.py": {"segment_balancer.plan.history": "dag_parse"},
    "plugins/segment_balancer_airflow/connect.py": {
        "segment_balancer.spark.apps": "dag_parse",
        "segment_balancer.spark.session": "dag_parse",
        "segment_balancer.tools.simulate": "dag_parse",
        "segment_balancer.tools.advise": "dag_parse",
        "segment_balancer_airflow.operators": "dag_parse",  # spark-submit mode's alone
    },
    "plugins/segment_balancer_airflow/druid.py": {
        "airflow.providers.apache.druid": "dag_parse",
        "segment_balancer.tools.capture": "dag_parse",
    },
    "plugins/segment_balancer_airflow/params.py": {
        "segment_balancer.planner.config": "dag_parse",
        "segment_balancer.tools.whatif": "dag_parse",
    },
    "plugins/segment_balancer_airflow/resolve.py": {
        "segment_balancer.planner.small_inputs": "dag_parse",
        "segment_balancer.spark.workdir": "dag_parse",
        "segment_balancer.tools.whatif": "dag_parse",
    },
    "plugins/segment_balancer_airflow/taskargs.py": {"segment_balancer.spark.apps": "dag_parse"},
    "plugins/segment_balancer_airflow/ui.py": {
        "segment_balancer.plan.compare": "dag_parse",
        "segment_balancer.plan.explain": "dag_parse",
    },
    # the package's modules that the plugin (common.files, plan.retention) or the spark-submit mode's
    # operators (spark.session) import at parse time
    "include/segment_balancer/common/files.py": {"pyarrow": "dag_parse"},
    "include/segment_balancer/plan/retention.py": {"segment_balancer.plan.publish": "dag_parse"},
    "include/segment_balancer/spark/session.py": {
        "pyspark": "dag_parse",  # the CLI's start too
        "pyarrow": "dag_parse",
        "segment_balancer.common.bulk": "dag_parse",  # pyarrow
    },
    # the CLI's start (python -m segment_balancer): pyspark, the applications' modules, GX, plotly
    "include/segment_balancer/tools/cli.py": {
        "segment_balancer.spark.prepare": "heavy_optional",
        "segment_balancer.spark.used_segments": "heavy_optional",
    },
    "include/segment_balancer/tools/simulate.py": {"segment_balancer.spark.druid_plan": "heavy_optional"},
    "include/segment_balancer/spark/apps.py": {
        "segment_balancer.druid.snapshot.lines": "heavy_optional",
        "segment_balancer.spark.used_segments": "heavy_optional",
        "segment_balancer.spark.prepare": "heavy_optional",
        "segment_balancer.spark.druid_plan": "heavy_optional",
        "segment_balancer.spark.stage_run": "heavy_optional",
        "segment_balancer.spark.assemble": "heavy_optional",
    },
    "include/segment_balancer/spark/state_store.py": {"pyspark": "heavy_optional"},
    "include/segment_balancer/plan/explain.py": {"segment_balancer.spark.used_segments": "heavy_optional"},
    "include/segment_balancer/plan/validation.py": {"great_expectations": "heavy_optional"},
    "include/segment_balancer/plan/report.py": {"plotly": "heavy_optional", "jinja2": "heavy_optional"},
    "include/segment_balancer/plan/advice_report.py": {"plotly": "heavy_optional"},
    "include/segment_balancer/planner/cost.py": {"scipy": "heavy_optional"},
    # the Connect and standalone servers' status and stop commands
    "include/segment_balancer/spark/connect_server.py": {"pyspark": "heavy_optional"},
    "include/segment_balancer/spark/standalone.py": {"pyspark": "heavy_optional"},
    # the validation process shuts out pyspark and sqlalchemy (sys.modules) before GX comes in
    "include/segment_balancer/plan/validation_process.py": {"segment_balancer.plan.validation": "before_import"},
}


def imported(node: ast.Import | ast.ImportFrom, path: str) -> list[str]:
    """The modules an import statement of the module at ``path`` names: ``import a.b`` names
    ``a.b``; ``from a import b`` names ``a`` and ``a.b`` (``b`` may be a module); relative imports
    resolved in the module's package."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    module = node.module or ""
    if node.level:
        package = Path(path).with_suffix("").parts[1:-1]  # include/, plugins/, … is no package
        base = ".".join(package[: len(package) - node.level + 1])
        module = f"{base}.{module}" if module else base
    return [module] + [f"{module}.{alias.name}" for alias in node.names]


def listed(names: list[str], allowed: dict[str, str]) -> bool:
    """Whether one of ``names`` is a module of ``allowed`` or one of its submodules."""
    return any(name == key or name.startswith(key + ".") for name in names for key in allowed)


def function_imports(source: str) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside a function (or method) body of ``source``, nested ones too."""
    found = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(ast.parse(source), False)
    return found


def top_imports(source: str) -> list[ast.Import | ast.ImportFrom]:
    """The import statements at a module's top level (outside functions and ``if`` blocks)."""
    return [node for node in ast.parse(source).body if isinstance(node, ast.Import | ast.ImportFrom)]


def unlisted(path: str, source: str, lazy: dict[str, dict[str, str]]) -> list[str]:
    """``path:line: statement`` of each import inside a function that ``lazy`` does not list."""
    allowed = lazy.get(path, {})
    return [
        f"{path}:{node.lineno}: {ast.unparse(node)}"
        for node in function_imports(source)
        if not listed(imported(node, path), allowed)
    ]


def sources() -> dict[str, str]:
    """The checked modules' sources by path relative to the repository."""
    return {
        p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8")
        for tree in TREES
        for p in sorted((REPO / tree).rglob("*.py"))
    }


def test_imports_inside_functions_are_listed():
    found = [line for path, source in sources().items() for line in unlisted(path, source, LAZY)]
    assert not found, (
        "imports inside functions: move them to the top of the module, or list the module in LAZY with the "
        "class of its reason (" + ", ".join(REASONS) + "):\n" + "\n".join(found)
    )


def test_every_listed_import_is_still_inside_a_function_of_its_module():
    """No stale entry: each listed module is imported inside a function of the module listing it."""
    every = sources()
    stale = [
        f"{path}: {module}"
        for path, allowed in LAZY.items()
        for module in allowed
        if path not in every
        or not any(listed(imported(node, path), {module: ""}) for node in function_imports(every[path]))
    ]
    assert not stale, "LAZY lists imports no function makes:\n" + "\n".join(stale)


def test_every_reason_is_one_of_the_classes():
    assert {reason for allowed in LAZY.values() for reason in allowed.values()} <= set(REASONS)


def bindings(node: ast.Import | ast.ImportFrom, path: str) -> set[tuple[str, str]]:
    """(name, what it names) of each name an import statement binds."""
    if isinstance(node, ast.Import):
        return {(a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0]) for a in node.names}
    module = imported(node, path)[0]
    return {(a.asname or a.name, f"{module}.{a.name}") for a in node.names}


def test_no_function_imports_a_name_again_that_the_top_imports():
    found = []
    for path, source in sources().items():
        at_top = {pair for node in top_imports(source) for pair in bindings(node, path)}
        found += [
            f"{path}:{node.lineno}: {ast.unparse(node)}"
            for node in function_imports(source)
            if bindings(node, path) & at_top
        ]
    assert not found, "imported at the top already:\n" + "\n".join(found)


def test_a_new_import_inside_a_function_of_an_unlisted_module_is_found():
    source = "import json\n\n\ndef f():\n    import pandas as pd\n\n    def g():\n        from . import x\n"
    assert unlisted("include/segment_balancer/new.py", source, LAZY) == [
        "include/segment_balancer/new.py:5: import pandas as pd",
        "include/segment_balancer/new.py:8: from . import x",
    ]
    lazy = {"include/segment_balancer/new.py": {"pandas": "heavy_optional"}}
    assert unlisted("include/segment_balancer/new.py", source, lazy) == [
        "include/segment_balancer/new.py:8: from . import x"
    ]


def test_a_listed_module_allows_only_the_modules_listed():
    source = "def f():\n    import pyarrow.parquet as pq\n    import pandas\n"
    path = "include/segment_balancer/common/files.py"
    assert unlisted(path, source, LAZY) == [f"{path}:3: import pandas"]
