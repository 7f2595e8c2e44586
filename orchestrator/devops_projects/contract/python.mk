# OpsBench's check contract for an upstream Python sdist (orchestrator/devops_projects; written beside the sources at
# fetch, protected like a project's own Makefile). Offline: pip installs the project and the test runner from the
# wheels in $(DEPS)/wheels alone. `build` makes a virtual environment and installs the project into it; `check`
# re-installs (an agent's change must build) and runs every test with a JUnit report in test-report.xml.
DEPS ?= /opt/opsbench-deps
VENV ?= .venv
PIP := $(VENV)/bin/pip install -q --no-index --find-links $(DEPS)/wheels
export PYTHONDONTWRITEBYTECODE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: build check clean

build:
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(PIP) pytest
	$(PIP) --force-reinstall --no-deps .

check: build
	$(VENV)/bin/pytest -q -p no:cacheprovider --junitxml=test-report.xml

clean:
	rm -rf $(VENV) test-report.xml build *.egg-info
