# The two commands a newcomer needs:
#   make demo   set up, then generate a small dataset on the embedded defaults (offline)
#   make test   set up, then run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/toolfactory run --config configs/quickstart.yaml
	$(BIN)/toolfactory stats --config configs/quickstart.yaml

test: $(STAMP)
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.gateway
	$(BIN)/python -m benchmarks.quickstart
	$(BIN)/python -m benchmarks.verifier
	$(BIN)/python -m benchmarks.real_data
	$(BIN)/python -m benchmarks.judges
	$(BIN)/python -m benchmarks.imports
	$(BIN)/python -m benchmarks.export
	$(BIN)/python -m benchmarks.pool_growth
	$(BIN)/python -m benchmarks.recipes

clean:
	rm -rf $(VENV) toolfactory-data toolfactory-stats.duckdb
