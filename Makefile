# Two commands do all set-up on a fresh machine:
#   make run    a local Kubernetes control plane with simulated nodes and a sample LeaderWorkerSet
#   make test   lint, type checks, unit tests and integration tests against a real control plane
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup controlplane tools lint unit integration crd clean

run: setup controlplane
	$(BIN)/lws demo

test: setup controlplane tools lint
	$(BIN)/pytest -q tests

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

controlplane:
	bash hack/build-controlplane.sh

# kubectl and helm for the install tests, cached like the control plane.
tools:
	bash hack/build-tools.sh

lint: setup
	$(BIN)/ruff check src tests bench hack
	$(BIN)/ruff format --check src tests bench hack
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests/unit

integration: setup controlplane tools
	$(BIN)/pytest -q tests/integration

# The kustomize manifests and the Helm chart ship the same generated CRD.
crd: setup
	$(BIN)/lws crd generate --output config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml
	$(BIN)/lws crd generate --output charts/lws/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
