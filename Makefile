# segment_balancer: build, test and demo.
#
#   make venv    create/update the virtualenv ($(VENV)) from requirements.txt (pinned), and build
#                the Spark driver's class-data-sharing archive in it (local spark-submits start faster)
#   make test    lint and format check (ruff), the import contracts (lint-imports; both set in
#                pyproject.toml), then the test suite
#                (pytest -q on up to 4 pytest-xdist workers)
#   make demo    run the Airflow DAG once on every bundled snapshot, publish plans under var/plans/
#   make cluster-demo  the same on a Spark standalone cluster (master + worker on 127.0.0.1)
#   make airflow the Airflow 3 deployment (scheduler, DAG processor, API server, triggerer, log
#                servers) on http://127.0.0.1:$(AIRFLOW_PORT) and the Spark Connect server the stages
#                run on (sc://127.0.0.1:$(SPARK_CONNECT_PORT)); user admin, password in var/airflow_home/
#                simple_auth_manager_passwords.json.generated; snapshots under var/snapshots; Ctrl+C
#                stops every process it started (segment_balancer/tools/local_airflow.py)
#   make connect-start / connect-stop  the Spark Connect server alone (log under var/connect/)
#   make clean   remove var/ (runs, plans, Airflow home); the venv is kept
#   make chromium  install Debian's chromium (apt) for the browser tests, unless already installed
#   make e2e     the browser test (Playwright + chromium) of a throw-away `make airflow` deployment,
#                and that Ctrl+C or SIGTERM stops every process of one
#
# Variables you may override: PYTHON (interpreter that creates the venv), VENV, VAR, SNAPSHOTS,
# SPARK_MODE (connect | spark-submit: how the DAG's Spark tasks run), SPARK_MASTER (the Connect
# server's master: local[*], spark://host:port, yarn), SPARK_CONNECT_MEMORY (the Connect server's
# driver memory), CONNECT_CONF (its extra Spark settings), and the ports (docs/RUNNING.md "Ports"; a port
# taken is refused in one line): AIRFLOW_PORT (8080), WORKER_LOG_PORT (8793) and TRIGGERER_LOG_PORT
# (8794: Airflow's log servers, on 127.0.0.1), SPARK_CONNECT_PORT (15002, its Spark UI the next),
# STANDALONE_PORT (7177, the master's and the worker's web UIs the next two). VERBOSE=1: `make
# airflow` shows its components' output on the terminal too.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

ROOT      := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PYTHON    ?= python3.11
VENV      ?= $(ROOT)/.venv
VAR       ?= $(ROOT)/var
SNAPSHOTS ?= $(ROOT)/include/segment_balancer/snapshots

VENV_ABS  := $(abspath $(VENV))
VAR_ABS   := $(abspath $(VAR))
BIN       := $(VENV_ABS)/bin
PY        := $(BIN)/python
STAMP     := $(VENV_ABS)/.segment_balancer-installed
JSA       := $(VENV_ABS)/share/segment_balancer/spark-driver.jsa
PIP       := $(PY) -m pip --disable-pip-version-check

# Everything below runs with the venv first on PATH (spark-submit, airflow), Spark's Python workers
# on the venv interpreter, runs/plans under var/, and a local Spark connection (without it the
# Spark provider falls back to --master yarn).
export PATH                       := $(BIN):$(PATH)
export PYSPARK_PYTHON             := $(PY)
export PYSPARK_DRIVER_PYTHON      := $(PY)
export SEGMENT_BALANCER_HOME      := $(VAR_ABS)
export AIRFLOW_CONN_SPARK_DEFAULT := {"conn_type": "spark", "host": "local[*]"}

# The DAG's Spark tasks: on a Spark Connect server (one session per DAG run) or one spark-submit each.
SPARK_MODE           ?= connect
SPARK_MASTER         ?= local[*]
SPARK_CONNECT_PORT   ?= 15002
SPARK_CONNECT_MEMORY ?= 4g
# Extra Spark settings of the Connect server (KEY=VALUE, space-separated), e.g. the shuffle
# partitions of a cluster master (a local master gets one per core by itself).
CONNECT_CONF         ?=
CONNECT_DIR          := $(VAR_ABS)/connect
CONNECT              := $(PY) -m segment_balancer.spark.connect_server --dir $(CONNECT_DIR) --port $(SPARK_CONNECT_PORT)
export AIRFLOW__SEGMENT_BALANCER__SPARK_MODE := $(SPARK_MODE)
export AIRFLOW_CONN_SPARK_CONNECT_DEFAULT    := {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": $(SPARK_CONNECT_PORT)}
export SEGMENT_BALANCER_CONNECT_MEMORY       := $(SPARK_CONNECT_MEMORY)

# In a recipe: start this checkout's Connect server unless it already answers (then it is left
# running afterwards), and stop the one it started when the recipe's shell ends, however it ends
# (connect_started=1 when it started one).
define with_connect_server
if [[ "$(SPARK_MODE)" == connect ]] && ! $(CONNECT) status >/dev/null 2>&1; then \
  $(CONNECT) start --master '$(SPARK_MASTER)' $(foreach c,$(CONNECT_CONF),--conf '$(c)') --stop-with $$$$; \
  connect_started=1; trap '$(CONNECT) stop' EXIT; trap 'exit 143' TERM HUP; trap 'exit 130' INT; \
fi
endef

.PHONY: venv test demo cluster-demo airflow-home airflow airflow-port clean chromium e2e connect-start connect-stop

venv: $(STAMP) $(JSA)

# Safe install order (see requirements.txt): all pins except pyspark (pyspark-client comes with the
# Spark provider), then pyspark itself without deps so its JVM jars and Python side own pyspark/,
# then this package in editable mode.  Re-runs only when the pins or pyproject.toml change.
$(STAMP): $(ROOT)/requirements.txt $(ROOT)/pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV_ABS) with $(PYTHON)"; $(PYTHON) -m venv $(VENV_ABS); }
	@$(PY) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"need Python 3.11, venv has {sys.version}"'
	$(PIP) install -q -r <(grep -v -E '^pyspark==' $(ROOT)/requirements.txt)
	$(PIP) install -q --no-deps "$$(grep -E '^pyspark==' $(ROOT)/requirements.txt)"
	$(PIP) install -q --no-deps -e $(ROOT)
	$(PIP) check
	@touch $@

# The class-data-sharing archive of the Spark driver JVM (segment_balancer/spark/jvm_archive.py): about
# 50 s to build, then every local spark-submit starts some 4 s sooner. Rebuilt with the venv.
$(JSA): $(STAMP)
	@echo "building the Spark driver class archive $@"
	$(PY) -m segment_balancer.spark.jvm_archive $@

# One pytest-xdist worker per core, at most 4 (each holds a Spark driver); a test module runs on one
# worker, so its module and session fixtures (a whole plan) are computed once there. Modules go out
# in collection order (tests/conftest.py puts the slowest first), not xdist's most-tests-first.
test: venv
	cd $(ROOT) && $(BIN)/ruff check . && $(BIN)/ruff format --check .
	cd $(ROOT) && $(BIN)/lint-imports --no-cache
	cd $(ROOT) && $(PY) -m pytest -q -p no:cacheprovider --durations=10 -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

# --- demo: a throw-away Airflow home under var/ --------------------------------------------------
AIRFLOW_HOME_DIR := $(VAR_ABS)/airflow_home
AIRFLOW_PORT     ?= 8080
WORKER_LOG_PORT  ?= 8793
TRIGGERER_LOG_PORT ?= 8794
VERBOSE          ?=
demo airflow-home airflow: export AIRFLOW_HOME := $(AIRFLOW_HOME_DIR)
demo airflow-home airflow: export REPO := $(ROOT)
demo airflow-home airflow: export VAR := $(VAR_ABS)
demo airflow-home airflow: export AIRFLOW_PORT := $(AIRFLOW_PORT)
demo airflow-home airflow: export WORKER_LOG_PORT := $(WORKER_LOG_PORT)
demo airflow-home airflow: export TRIGGERER_LOG_PORT := $(TRIGGERER_LOG_PORT)

# The rendered config; the JWT secret is generated once and kept (every component must share it).
airflow-home: venv
	@mkdir -p $(AIRFLOW_HOME_DIR) $(VAR_ABS)/xcom
	@test -s $(AIRFLOW_HOME_DIR)/jwt_secret || { umask 077; $(PY) -c 'import secrets; print(secrets.token_urlsafe(32))' > $(AIRFLOW_HOME_DIR)/jwt_secret; }
	@JWT_SECRET=$$(cat $(AIRFLOW_HOME_DIR)/jwt_secret) envsubst '$${REPO} $${VAR} $${AIRFLOW_PORT} $${WORKER_LOG_PORT} $${TRIGGERER_LOG_PORT} $${JWT_SECRET}' \
	  < $(ROOT)/airflow.cfg.template > $(AIRFLOW_HOME_DIR)/airflow.cfg
	@airflow db migrate > $(AIRFLOW_HOME_DIR)/db-migrate.log 2>&1 || { cat $(AIRFLOW_HOME_DIR)/db-migrate.log; exit 1; }

# Each run publishes to var/plans/<run id>/; var/plans/LATEST names the plan of the newest snapshot.
# Airflow's output of each run (task logs included) goes to var/demo-logs/<snapshot>.log, also to the
# terminal with VERBOSE=1; the recap at the end says where each plan and its report are.
DEMO_LOGS := $(VAR_ABS)/demo-logs
demo: airflow-home
	@$(with_connect_server); \
	shopt -s nullglob; found=0; plans=$(VAR_ABS)/plans; published=(); mkdir -p $(DEMO_LOGS); \
	for meta in $(SNAPSHOTS)/*/snapshot.json; do \
	  snap=$$(dirname $$meta); found=1; log=$(DEMO_LOGS)/$$(basename $$snap).log; \
	  echo "=== segment_balancing on $$snap (Airflow's output: $$log)"; \
	  before=$$(ls $$plans 2>/dev/null || true); started=$$SECONDS; \
	  if [[ -n "$(VERBOSE)" ]]; then \
	    airflow dags test segment_balancing --conf "{\"snapshot\": \"$$snap\"}" 2>&1 | tee $$log; \
	  else \
	    airflow dags test segment_balancing --conf "{\"snapshot\": \"$$snap\"}" > $$log 2>&1 \
	      || { tail -n 30 $$log; echo "the DAG run on $$snap failed; its output: $$log" >&2; exit 1; }; \
	  fi; \
	  plan=$$(comm -13 <(echo "$$before") <(ls $$plans 2>/dev/null || true) | grep -v '^LATEST$$' | tail -1 || true); \
	  [[ -n "$$plan" ]] || { tail -n 30 $$log; echo "no plan was published for $$snap; its output: $$log" >&2; exit 1; }; \
	  echo "    planned in $$((SECONDS - started)) s: $$plans/$$plan"; published+=("$$plans/$$plan"); \
	done; \
	test $$found = 1 || { echo "no snapshots under $(SNAPSHOTS)" >&2; exit 1; }; \
	echo; echo "=== recap: each snapshot, its plan and report (python -m segment_balancer summary PLAN for more)"; \
	$(PY) -m segment_balancer summary --brief "$${published[@]}"

# The demo with every Spark job going to a Spark standalone cluster (the Connect server's master, or
# every spark-submit's with SPARK_MODE=spark-submit) started from the installed
# PySpark (segment_balancer/spark/standalone.py: a master and one worker on 127.0.0.1, logs under
# var/standalone/), stopped afterwards whatever happens.
STANDALONE_DIR  := $(VAR_ABS)/standalone
STANDALONE_CORES := $(shell nproc)
STANDALONE_PORT ?= 7177
cluster-demo: airflow-home
	@$(PY) -m segment_balancer.spark.standalone start --dir $(STANDALONE_DIR) --port $(STANDALONE_PORT) \
	  --cores $(STANDALONE_CORES); \
	trap '$(PY) -m segment_balancer.spark.standalone stop --dir $(STANDALONE_DIR) --port $(STANDALONE_PORT)' EXIT; \
	export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "spark://127.0.0.1", "port": $(STANDALONE_PORT)}'; \
	$(MAKE) --no-print-directory demo AIRFLOW_CONN_SPARK_DEFAULT="$$AIRFLOW_CONN_SPARK_DEFAULT" \
	  SPARK_MASTER=spark://127.0.0.1:$(STANDALONE_PORT) CONNECT_DIR=$(VAR_ABS)/connect-cluster \
	  CONNECT_CONF="spark.sql.shuffle.partitions=$(STANDALONE_CORES)"

# A real deployment: `airflow standalone` (scheduler, DAG processor, API server, triggerer) on the
# rendered config, in the foreground (Ctrl-C stops it). Snapshots live under var/snapshots, seeded
# with links to the bundled ones; druid_snapshot_capture writes its captures there too. The Druid
# connections come from AIRFLOW_CONN_DRUID_BROKER_DEFAULT / AIRFLOW_CONN_DRUID_COORDINATOR_DEFAULT
# when set, else from the UI (Admin > Connections).
airflow: export SEGMENT_BALANCER_SNAPSHOTS := $(VAR_ABS)/snapshots
airflow: airflow-port airflow-home
	@mkdir -p $(VAR_ABS)/snapshots
	@for snap in $(SNAPSHOTS)/*/; do \
	  [[ -d $$snap ]] || continue; \
	  name=$$(basename $$snap); [[ -e $(VAR_ABS)/snapshots/$$name ]] || ln -s $${snap%/} $(VAR_ABS)/snapshots/$$name; \
	done
	@connect_started=; $(with_connect_server); \
	echo "Airflow on http://127.0.0.1:$(AIRFLOW_PORT): user admin, password in $(AIRFLOW_HOME_DIR)/simple_auth_manager_passwords.json.generated"; \
	exec $(PY) -m segment_balancer.tools.local_airflow run $(if $(VERBOSE),--verbose) \
	  $${connect_started:+--connect-dir $(CONNECT_DIR) --connect-port $(SPARK_CONNECT_PORT)}

# The API server's port, checked before anything is set up (one line if taken: common/ports.py).
airflow-port: venv
	@$(PY) -m segment_balancer.common.ports AIRFLOW_PORT=$(AIRFLOW_PORT) WORKER_LOG_PORT=$(WORKER_LOG_PORT) \
	  TRIGGERER_LOG_PORT=$(TRIGGERER_LOG_PORT)

# The Spark Connect server alone (for the CLI's --remote / SPARK_REMOTE, or a deployment that keeps it up).
connect-start: venv
	$(CONNECT) start --master '$(SPARK_MASTER)'
connect-stop: venv
	$(CONNECT) stop

clean:
	rm -rf $(VAR_ABS)

# Debian's chromium for Playwright (its own browser download is not available on the CI machines).
chromium:
	command -v chromium >/dev/null || { apt-get update && apt-get install -y chromium; }

# The browser test (tests/e2e/): starts `make airflow` in a temporary directory on a free port,
# drives the UI in chromium; screenshots and the deployment's log under var/e2e-artifacts/.
e2e: venv chromium
	cd $(ROOT) && SEGMENT_BALANCER_E2E=1 SEGMENT_BALANCER_E2E_ARTIFACTS=$(VAR_ABS)/e2e-artifacts $(PY) -m pytest -q -p no:cacheprovider --durations=15 tests/e2e
