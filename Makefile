# The two commands a newcomer needs:
#   make demo   set up, then generate a small dataset on the embedded defaults (offline)
#   make test   set up, then run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test docs bench bench-peers bench-scale setup clean browser postgres mcp-servers mypy-baseline

# uv installs the same releases as pip does, in a third of its time, compiled as pip compiles them.
UV := $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python
# Where PYTHONDONTWRITEBYTECODE is set (CI images often set it), no process keeps what it compiled:
# each process of the suite or a run would compile the product again (0.4 s). Compiled once here
# (0.2 s when nothing changed).
COMPILE := $(BIN)/python -m compileall -q -j 0 toolfactory flows tasks >/dev/null

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet "uv>=0.9"
	$(UV) -e ".[test,docs]"
	# BFCL's checker judges the BFCL export in the tests. bfcl-eval declares torch, the providers'
	# SDKs and numpy==1.26.4, none of which its checker needs: installed alone.
	$(UV) --no-deps "bfcl-eval==2026.3.23"
	# The consumers' own code checks the preference and ShareGPT exports: TRL's data utilities and
	# LLaMA-Factory's dataset parser and converter. Neither needs its training stack (torch, peft)
	# for that, so both are installed alone.
	$(UV) --no-deps "trl==1.16.0" "llamafactory==0.9.5"
	# The RL libraries of tests/rl (the `rl` extra): verifiers 0.2.0 pins datasets<4.7, which its
	# environment code does not need, so its other requirements are installed and then it alone.
	$(UV) "skyrl-gym==0.4.0" aiolimiter "anthropic>=0.78" gepa "loguru>=0.7" "math-verify>=0.8" "msgpack>=1.1.2" \
	    "openai-agents>=0.0.7" "prime-pydantic-config[toml]>=0.3.0.dev86" "prime-sandboxes>=0.2.27" \
	    "prime-tunnel>=0.1.8" "pyzmq>=27.1" "renderers>=0.1.8.dev40" "setproctitle>=1.3" "tomli-w>=1.0" "uvloop>=0.21"
	$(UV) --no-deps "verifiers==0.2.0"
	touch $(STAMP)

setup: $(STAMP)

# `run` ends by printing the run's stats table (the same as `toolfactory stats`).
demo: $(STAMP)
	$(COMPILE)
	$(BIN)/toolfactory run --config configs/quickstart.yaml

# The run report's browser test needs a headless Chromium. Installed with apt-get when missing and
# this runs as root; otherwise that test skips with its reason (it fails instead when CI is set).
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium not found and not installable here (needs root and apt-get): the report's browser test will skip"; fi

# The production stack's test (tests/test_stack.py) runs Prefect's server on Postgres, as in
# production. Installed with apt-get when missing and this runs as root; otherwise that test runs
# the server on SQLite and says so.
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else echo "postgresql not found and not installable here (needs root and apt-get): the stack test uses SQLite"; fi

# Published MCP servers from npm that the MCP source's tests run (tests/executable/test_mcp_servers.py)
# and the catalog's presets name (toolfactory/executable/mcp/presets.py, tests/executable/test_catalog.py),
# installed into build/mcp-servers; without npm those tests skip with their reason (fail when CI is set).
MCP_SERVERS := build/mcp-servers
MCP_NPM     := @modelcontextprotocol/server-memory@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31 \
	@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-sequential-thinking@2026.8.31 \
	@coo-quack/calc-mcp@2.1.1
# A PyPI server built on the 1.x MCP SDK (the factory's is 2.x) goes into a venv of its own,
# build/mcp-servers/py/<program>, as uvx or pipx would put it (with the factory's uv when it is there).
MCP_SQLITE  := mcp-server-sqlite==2025.4.25 mcp==1.30.0

mcp-servers:
	@if grep -qxF "$(MCP_NPM)" $(MCP_SERVERS)/.installed 2>/dev/null; then :; \
	elif command -v npm >/dev/null 2>&1; then \
		npm install --prefix $(MCP_SERVERS) --no-audit --no-fund --loglevel=error $(MCP_NPM) && echo "$(MCP_NPM)" > $(MCP_SERVERS)/.installed; \
	else echo "npm not found: the tests of MCP servers from npm will skip"; fi
	@venv=$(MCP_SERVERS)/py/mcp-server-sqlite; \
	if grep -qxF "$(MCP_SQLITE)" $$venv/.installed 2>/dev/null; then :; \
	else rm -rf $$venv && $(PYTHON) -m venv $$venv && \
		if [ -x $(BIN)/uv ]; then $(BIN)/uv pip install --quiet --python $$venv/bin/python $(MCP_SQLITE); \
		else $$venv/bin/pip install --quiet $(MCP_SQLITE); fi && echo "$(MCP_SQLITE)" > $$venv/.installed; fi

# Two workers (pytest-xdist) share every test; the 25 slowest are listed at the end. When some
# fail, their ids are printed last (processes a test started may print after pytest's summary).
test: $(STAMP) browser postgres mcp-servers
	$(COMPILE)
	@$(BIN)/pytest -q -n 2 --dist loadgroup --durations=25 || { status=$$?; \
		echo "failed or errored:"; cat .pytest_cache/v/cache/lastfailed 2>/dev/null; echo; exit $$status; }

# The suite runs ruff and mypy too (tests/test_static_checks.py). mypy is a ratchet: a module may
# keep the type errors tests/mypy_baseline.json counts, no more. This rewrites the counts (after
# fixing some, or when code moved between modules); the strict packages listed there stay at none.
mypy-baseline: $(STAMP)
	$(BIN)/python -m tests.mypy_ratchet --update

# The documentation site, into build/site (the suite builds it too, with warnings as errors).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP) mcp-servers
	$(BIN)/python -m benchmarks.gateway
	$(BIN)/python -m benchmarks.quickstart
	$(BIN)/python -m benchmarks.prompt_cache
	$(BIN)/python -m benchmarks.overlap
	$(BIN)/python -m benchmarks.verifier
	$(BIN)/python -m benchmarks.real_data
	$(BIN)/python -m benchmarks.judges
	$(BIN)/python -m benchmarks.imports
	$(BIN)/python -m benchmarks.export
	$(BIN)/python -m benchmarks.pool_growth
	$(BIN)/python -m benchmarks.recipes
	$(BIN)/python -m benchmarks.curate_scale
	$(BIN)/python -m benchmarks.execution
	$(BIN)/python -m benchmarks.executable_runs
	$(BIN)/python -m benchmarks.task_runner

# benchmarks.gateway with the peer frameworks beside it: they pin other versions of our
# dependencies (curator: openai<3), so they get a venv of their own, and run there.
PEERS := .venv-peers
$(PEERS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install --quiet --upgrade pip
	$(PEERS)/bin/pip install --quiet -e ".[bench-peers]"
	touch $(PEERS)/.installed

bench-peers: $(STAMP) $(PEERS)/.installed
	$(BIN)/python -m benchmarks.gateway --peers-python $(PEERS)/bin/python

# About 10,000 tasks at 0 ms and at 1 s simulator latency: the figures of the night plan in
# benchmarks/README.md (about 45 minutes on 2 CPUs); then the quickstart beside a CPU load
# (benchmarks.busy_start, about 40 minutes).
bench-scale: $(STAMP)
	$(BIN)/python -m benchmarks.scale
	$(BIN)/python -m benchmarks.prefect_load
	$(BIN)/python -m benchmarks.busy_start --tries 3

clean:
	rm -rf $(VENV) toolfactory-data toolfactory-stats.duckdb
