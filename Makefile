# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := out/demo

.PHONY: demo test test-all bench lint clean

# The version lives in src/graphopt/__init__.py, so a new one reinstalls the metadata. The warm-up
# compiles every numba kernel the commands use (about three minutes), so no command compiles.
$(STAMP): pyproject.toml src/graphopt/__init__.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/graphopt warmup || echo "warning: graphopt warmup failed; commands compile on first use"
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p $(DEMO)
	$(BIN)/graphopt generate layered -n 200 --seed 0 -o $(DEMO)/graph.json
	$(BIN)/graphopt info $(DEMO)/graph.json
	$(BIN)/graphopt optimize $(DEMO)/graph.json --devices 2 -o $(DEMO)/solution.json
	$(BIN)/graphopt score $(DEMO)/graph.json $(DEMO)/solution.json
	$(BIN)/python examples/compare_solvers.py $(DEMO)/graph.json --devices 2
	$(BIN)/graphopt zoo export resnet18 --train -o $(DEMO)/resnet18-train.json
	$(BIN)/graphopt optimize $(DEMO)/resnet18-train.json --devices 2 -o $(DEMO)/resnet18-solution.json
	$(BIN)/graphopt optimize $(DEMO)/resnet18-train.json --devices 2 --solver regal -o $(DEMO)/resnet18-regal.json

# Two test workers (pytest-xdist), one per core: 10.6 minutes on a clean clone (each worker
# compiles the numba kernels the warm-up does not) against 11 to 13 in one process; 8 once warm.
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m ''

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/bench_scorer.py
	$(BIN)/python benchmarks/bench_io.py
	$(BIN)/python benchmarks/bench_brkga.py
	$(BIN)/python benchmarks/bench_import.py
	$(BIN)/python benchmarks/bench_regal.py
	$(BIN)/python benchmarks/bench_cli.py --cold

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
