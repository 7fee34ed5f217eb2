# make test / make demo work on a fresh machine: each creates .venv and installs the project.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo install chromium pg clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

# Reinstall when the dependency list or the C reader (built by pip install) changes.
$(STAMP): pyproject.toml $(wildcard collector/normalize/otlp_wire/*) | $(BIN)/python
	$(BIN)/pip install -q -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

# The HTML report test and the web UI test (Playwright) render in Debian's headless Chromium.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (apt-get) for the report and web UI browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "warning: chromium could not be installed; the browser tests will be skipped"; }

# tests/collector/test_ducklake.py starts a private PostgreSQL cluster (the DuckLake catalog)
# from Debian's postgresql binaries.
pg:
	@{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || { \
	  echo "installing postgresql (apt-get) for the DuckLake tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
	  || echo "warning: postgresql could not be installed; the DuckLake tests will be skipped"; }

test: $(STAMP) chromium pg
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/tracefix demo

clean:
	rm -rf $(VENV) .tracefix build *.egg-info
