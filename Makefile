# Every target installs what it needs first; `make install` is quick when nothing changed.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
# uv from PATH, else the copy pip installs (run as `python -m uv`).
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
STAMP := $(VENV)/.installed

.PHONY: install browser demo test bench bench-quick lint format report clean

$(STAMP): pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 \
		|| $(PYTHON) -m pip install --quiet uv
	$(UV) sync --frozen --all-extras --compile-bytecode
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/esper-warehouse demo

# The report's browser test opens the pages in Debian's Chromium: installed here when it is
# missing and apt-get can (root); otherwise that test says how to install it.
browser:
	@[ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1 \
		|| { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] \
			&& echo "installing Chromium (Debian) for the report's browser test" \
			&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				chromium >/dev/null; } \
		|| echo "note: Chromium is missing; the report's browser test will fail (apt-get install chromium)"

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): the
# suite starts hundreds of Python processes (workers, the CLI, notebook kernels), and each would
# compile the project's modules and rewrite the test modules' assertions again (~12 % of the CPU
# of the CLI tests). __pycache__ is ignored by git.
test: install browser
	env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/python -m pytest -q

# The slow scenarios (`-m slow`) first, then the benchmarks.
bench: install
	$(VENV)/bin/python -m pytest -q -m slow
	$(VENV)/bin/python -m bench

bench-quick: install
	$(VENV)/bin/python -m bench --quick

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The command's default is esper_warehouse.duckdb; after `make demo` only demo.duckdb exists.
WAREHOUSE ?= $(if $(wildcard esper_warehouse.duckdb),esper_warehouse.duckdb,demo.duckdb)
report: install
	$(VENV)/bin/esper-warehouse report --warehouse $(WAREHOUSE)

clean:
	rm -rf $(VENV) .pytest_cache build dist
