# Two commands do all set-up on a fresh machine:
#   make run    a local Kubernetes control plane with simulated nodes, a sample LeaderWorkerSet,
#               the Hash-mode replacement story and the gang story (STORY=sample|hash|gang|all),
#               then exits
#   make test   lint, type checks, a check of the plain install, unit tests and integration
#               tests against a real control plane
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup controlplane tools image release node lint install-check unit unit-pythons integration realnode e2e-real compat compat-k8s chaos soak mutation crd clean

# STORY=sample (the Ordinal sample), hash (the Hash-mode replacement story), gang (two
# LeaderWorkerSets competing for a full cluster, without and with gang scheduling) or all.
STORY ?= all
run: setup controlplane
	$(BIN)/lws demo --story $(STORY) --exit-when-ready

test: setup controlplane tools node lint install-check
	$(BIN)/pytest -q tests

setup: $(STAMP)

$(STAMP): pyproject.toml localcluster/pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found (.venv is Python 3.11, the image's)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench]' -e ./localcluster
	touch $(STAMP)

controlplane:
	bash hack/build-controlplane.sh

# kubectl and helm for the install tests, cached like the control plane.
tools:
	bash hack/build-tools.sh

# The container images (controller, pause, rendezvous) as OCI archives in
# ~/.cache/leaderworkerset/images/, without Docker or a registry; prints `NAME REF ARCHIVE`
# per image (docs/operations.md, "Building the image"). Needs root. IMAGES=pause builds one.
IMAGES ?=
image: setup
	LWS_PYTHON=$(BIN)/python bash hack/build-images.sh $(IMAGES)

# A release in one folder (RELEASE_DIR): wheel, sdist, the controller image for amd64 and
# arm64 as OCI archives and one index, manifests.yaml, the packaged chart, SBOMs and
# SHA256SUMS (hack/release.sh; docs/operations.md, "Publishing a release"). VERSION is
# src/leaderworkerset/_version.py's (a different one is refused: set it there, with a
# CHANGELOG.md entry); REGISTRY is where you will push it, which the chart and
# manifests.yaml name. Needs root; arm64 is built under qemu-user-static.
VERSION ?= $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' src/leaderworkerset/_version.py)
REGISTRY ?= localhost:5000/lws
RELEASE_DIR ?= dist/release/$(VERSION)
release: setup tools
	LWS_PYTHON=$(BIN)/python bash hack/release.sh $(VERSION) $(REGISTRY) $(RELEASE_DIR)

# The real node (tests/realnode, `lws dev up --real-node`): Debian's containerd, runc and
# CNI plugins (installed with apt-get when missing; root), kubelet, kube-proxy and CoreDNS
# built like the control plane, and the images it runs, built with no registry.
# docker-registry and skopeo: the local registry the release is pushed to and installed
# from; qemu-user-static, binfmt-support and arch-test: the release's arm64 image.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables iproute2 conntrack mmdebstrap \
	docker-registry skopeo qemu-user-static binfmt-support arch-test
node: image
	bash hack/debian-packages.sh $(NODE_PACKAGES)
	bash hack/build-node.sh

lint: setup
	$(BIN)/ruff check src localcluster tests bench hack
	$(BIN)/ruff format --check src localcluster tests bench hack
	$(BIN)/mypy
	$(BIN)/mypy --strict hack/images
	PYTHONPATH=src:localcluster/src $(BIN)/lint-imports
	$(BIN)/python hack/long_functions.py src/leaderworkerset localcluster/src/lws_localcluster hack/images

# What `pip install .` gives a user (no extras, not editable) must start: the package is
# built from a copy of the sources (no stale build/ or egg-info) into a fresh venv, and
# the commands that need no cluster are run against every sample.
install-check:
	@set -eu; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tar --exclude=__pycache__ --exclude='*.egg-info' -cf - pyproject.toml README.md LICENSE src \
		| tar -xf - -C "$$tmp"; \
	cp constraints.txt "$$tmp"/; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	(cd "$$tmp" && venv/bin/pip install -q -c constraints.txt .); \
	"$$tmp/venv/bin/lws" --help >/dev/null; \
	"$$tmp/venv/bin/lws" controller --help >/dev/null; \
	if "$$tmp/venv/bin/python" -c 'import lws_localcluster' 2>/dev/null; then \
		echo "install-check: the plain install carries the local cluster"; exit 1; fi; \
	"$$tmp/venv/bin/lws" dev up 2>&1 | grep -q 'pip install ./localcluster' \
		|| { echo "install-check: lws dev does not say what to install"; exit 1; }; \
	for sample in config/samples/*.yaml; do \
		"$$tmp/venv/bin/lws" validate "$$sample" >/dev/null; \
	done; \
	echo "install-check: the plain install is the controller alone, starts and validates every sample"

# tests/unit/manifests renders the chart and the overlays with the built helm and kubectl.
unit: setup tools
	$(BIN)/pytest -q tests/unit

# The other Pythons the package supports (.venv is 3.11): on each, the unit suite in a venv
# of that version, then install-check with that interpreter. The venvs are cached in
# ~/.cache/leaderworkerset/venvs, installed from the same constraints and reused while
# constraints.txt and the pyproject.toml files' dependencies are unchanged
# (hack/unit-pythons.sh, which also says where it looks for each interpreter; timings in
# docs/testing.md). PYTHONS=3.13 checks one; CI runs it (.ci/run).
PYTHONS ?= 3.12 3.13
unit-pythons: tools
	bash hack/unit-pythons.sh $(PYTHONS)

integration: setup controlplane tools
	$(BIN)/pytest -q tests/integration

realnode: setup controlplane tools node
	$(BIN)/pytest -q tests/realnode

# The real node end to end (opt-in): the fast suite's tests/realnode, then the kustomize
# install, upstream's release migrated to ours and back, and upstream's e2e suite
# (hack/build-upstream-e2e.sh compiles it) against the installed controller; each step's
# time is printed (how long in all: docs/real-node.md).
e2e-real: setup controlplane tools node
	$(BIN)/pytest -q -s --durations=0 tests/realnode tests/e2e_real

# Migration to and from upstream's Go controller (opt-in: builds it from the Go
# module proxy on first use, then runs both ways against the local control plane),
# and upstream's DisaggregatedSet e2e suite against ours (it needs kubectl).
compat: setup controlplane tools
	bash hack/build-upstream-lws.sh
	bash hack/build-upstream-e2e.sh disaggregatedset
	$(BIN)/pytest -q -s tests/compat

# The Kubernetes releases upstream supports (opt-in): for each, its control plane is built
# (hack/build-controlplane.sh with K8S_VERSION, cached per release: the first build of each
# takes minutes), then tests/compat_k8s runs the install, the webhooks, a Hash-mode group
# story and the gang story (skipped, with the reason, where the Workload API is not served)
# on a local cluster of it; a table of each step's outcome and time ends the run
# (hack/compat-k8s.sh; the last results in docs/testing.md). K8S_VERSIONS=v1.34.4 runs one.
K8S_VERSIONS ?= v1.34.4 v1.35.4 v1.36.3 v1.37.2
compat-k8s: setup tools
	LWS_PYTHON=$(BIN)/python bash hack/compat-k8s.sh $(K8S_VERSIONS)

# Faults on the real control plane (controller SIGKILLs, API server restarts and expired
# watches, a webhook outage, concurrent edits, fuzzed admission), each ending with the
# invariant checks; prints every scenario's figures. Opt-in; how long: docs/chaos.md.
chaos: setup controlplane
	$(BIN)/pytest -q tests/chaos

# Single-point changes (mutants) to the decision modules, each run against the unit tests
# that reach it; survivors are what no fast test notices (docs/testing.md). Opt-in: about
# an hour with one worker. MUTATION_JOBS sets the workers; `mutmut results` lists the survivors
# and `mutmut show NAME` shows one. A fresh run each time (the old working copy is removed).
MUTATION_JOBS ?= 1
# An hour of churn against a local cluster, the controller as two processes under
# leader election; writes soak.md, soak.json and soak.png to SOAK_OUT (docs/soak.md).
# Opt-in, like chaos: MINUTES=15 for a shorter run.
MINUTES ?= 60
SOAK_OUT ?= soak-out
soak: setup controlplane
	$(BIN)/python -m bench.soak --minutes $(MINUTES) --out $(SOAK_OUT)

mutation: setup
	rm -rf mutants
	$(BIN)/mutmut run --max-children $(MUTATION_JOBS)
	$(BIN)/python hack/mutation_scores.py

# The kustomize manifests and the Helm chart ship the same generated CRDs, under
# upstream's file names.
CRDS := leaderworkerset.x-k8s.io_leaderworkersets \
	disaggregatedset.x-k8s.io_disaggregatedsets \
	disaggregatedset.x-k8s.io_disaggregatedsetrolescalers
crd: setup
	@set -e; for name in $(CRDS); do \
		for dir in config/crd/bases charts/lws/crds; do \
			$(BIN)/lws crd generate --kind "$${name#*_}" --output "$$dir/$$name.yaml"; \
		done; \
	done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis mutants
