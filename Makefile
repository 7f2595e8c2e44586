# OpsBench: `make setup`, then `make test`, then `make scenario NAME=<id>`.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
VENV ?= .venv
PYTHON ?= python3
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export XDG_CACHE_HOME ?= $(CURDIR)/.opsbench/cache
# ansible.cfg's remote_tmp is relative, and the local connection resolves it against the playbook's directory:
# playbooks run by make targets (make cluster, make kyverno, ...) would leave playbooks/.opsbench behind (the
# orchestrator sets its own, absolute). One place for everything: the state dir.
export ANSIBLE_REMOTE_TEMP ?= $(CURDIR)/.opsbench/ansible/tmp
# Hide pip's notes about unreachable local package mirrors; real errors still show.
PIP_FILTER := grep -v -e "^WARNING: Location 'file:" || true
NAME ?=
AGENT ?=
BACKEND ?=
PYTEST_ARGS ?=

.PHONY: cluster cluster-build cluster-down test-k8s-smoke devops-projects devops-tasks devops-verify dev-split heldout agents test-agents test-full reliability fuzz e2e-kubernetes k8s-images awx-export bench-awx bench-finops verify-scenarios bench-local bench-k8s help setup venv bootstrap images test test-unit lint scenario list validate docs bench cleanup clean

help:
	@echo "make setup                   create $(VENV), install Python deps and system packages, build the images"
	@echo "make images                  configure podman and build the local backend's images (cached by content)"
	@echo "make test                    the CI suite: unit + end to end on two workers (its time: README.md, 'The test suite')"
	@echo "make test-unit               the unit tests alone, on two workers"
	@echo "make test-full               make test, then make reliability (everything)"
	@echo "make scenario NAME=<id>      run one scenario end to end [AGENT='cmd ...'] [BACKEND=kubernetes]"
	@echo "make list                    list scenarios"
	@echo "make validate                check every scenario spec (schema + semantics)"
	@echo "make docs                    regenerate the reference docs and catalogs"
	@echo "make verify-scenarios        prove every SRE scenario manifests and recovers [IDS='...' REPEATS=3]"
	@echo "make dev-split               build the public dev split: every template, seed opsbench-dev-1, proven live and recorded [COUNT=270 K=2 CORPUS_OUT=...]; resumable"
	@echo "make heldout SEED_FILE=F     build a held-out split from a private seed file, none of the dev split's incidents, proven live and recorded [HELDOUT_COUNT=120 K=2 HELDOUT_OUT=... RETRY=1]; resumable"
	@echo "make devops-projects         fetch, verify, build and test the DevOps upstream projects (live) [IDS='...' WHERE=host|workspace RECORD=1]"
	@echo "make devops-tasks            draw and verify DevOps tasks from the fetched upstream projects [IDS='...' FAMILIES='issue testgen build monitoring pipeline' DEVOPS_SEED=... DEVOPS_COUNT=3 DEVOPS_TASKS_OUT=... DEVOPS_FROM='dir ...' RECORD=1]"
	@echo "make devops-verify           prove every generated DevOps task again from its files [DEVOPS_VERIFY='folders ...' WHERE=host|workspace]"
	@echo "make lint                    ansible-lint (production), ruff, mypy"
	@echo "make agents                  install the agent presets' CLIs (Claude Code, Codex, Gemini CLI, OpenCode) under .agents/ (npm, pinned)"
	@echo "make test-agents             the presets with the real CLIs against scripted model servers (needs make agents)"
	@echo "make bench-agents            each preset's overhead per trial over a bare agent, replays against a scripted model [AGENT_TRIALS=3]"
	@echo "make reliability             interruptions at every phase, own faults, idempotence, fuzzing, isolation audit"
	@echo "make fuzz                    random property/API fuzzing, 10x the cases; prints the seed [SEED=<n> replays]"
	@echo "make bench                   orchestrator vs bare ansible-playbook over a fault cycle"
	@echo "make bench-local             the local backend: warm deploy, memory under load, teardown"
	@echo "make bench-k8s               the local cluster: build, start, memory idle and with the shop, k8s vs local trials, down [COLD=1 K8S_BENCH_TRIALS=2 JSON=1]"
	@echo "make bench-awx [NAME=id]     time AWX-contract runs (exported workflow via ansible-runner) vs opsbench run"
	@echo "make bench-finops            time 5M FOCUS rows + ground truth and the FinOps reference queries"
	@echo "make e2e-kubernetes          live tests of the kubernetes backend (needs KUBECONFIG of a reachable cluster)"
	@echo "make cluster                 build (cached) and start a single-node Kubernetes cluster here [K8S_RELEASE=v1.34.4]"
	@echo "make cluster-build           only build (cached) the cluster's binaries [K8S_RELEASE=v1.34.4]"
	@echo "make test-k8s-smoke          cluster up, one SRE and the CISO cluster class live on it, cluster down (CI)"
	@echo "make cluster-down            stop it and remove everything it put on the host (binaries stay cached)"
	@echo "make kyverno                 build (cached), load and install Kyverno v1.19.1 on the local cluster (CISO classes)"
	@echo "make kyverno-down            remove Kyverno and the webhooks it registered (the build stays cached)"
	@echo "make k8s-images              load the shop's images into kind [KIND_CLUSTER=opsbench] or push them [K8S_REGISTRY=host/path]"
	@echo "make awx-export              write the AWX objects playbook (awx/opsbench_awx.yml)"
	@echo "make cleanup                 finish interrupted runs (removal and teardown)"
	@echo "make clean                   remove .opsbench (state, runs, caches)"

setup: venv bootstrap images

venv:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip 2>&1 | $(PIP_FILTER)
	@$(BIN)/python -m pip install -q -e '.[dev]' 2>&1 | $(PIP_FILTER)
	@$(BIN)/python -c "import orchestrator, ansible_runner, ansible" && echo "python deps: ok"

# System packages through an idempotent playbook (Debian/Ubuntu; other systems get a clear message).
bootstrap:
	@$(BIN)/ansible-playbook playbooks/bootstrap.yml

# podman's configuration and the local backend's images (cached by content hash: a warm run builds nothing).
images:
	@$(BIN)/ansible-playbook playbooks/images.yml

# Two workers (tests/scheduling.py): the time-bound end-to-end tests (shop, loopweb) run in order on one; the
# host-level end-to-end tests (CIS hosts, idempotence, FinOps stores, images) and the unit tests, the replay tests on
# the sample snapshots among them, run on the other. The 30 slowest tests are listed at the end.
TEST_WORKERS ?= 2
# Replays per sample snapshot in the determinism test (make reliability: 10).
REPLAY_TRIALS ?= 5
test:
	@OPSBENCH_REPLAY_TRIALS=$(REPLAY_TRIALS) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30 \
	  $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: treating as failure"; exit 1; fi; exit $$rc

# `make test`, then what does not fit CI's budget (`make reliability`).
test-full: test reliability

# Interruptions at every phase, own infrastructure faults, idempotence of the roles, every shop fault role verified
# live (`make test` proves a sample of them; live, est. 70-80 min); then the fast
# reliability checks that `make test` also runs (fuzzing, isolation audit, secrets scanner). See docs/reliability.md.
reliability:
	@$(BIN)/pytest -m reliability tests/e2e/test_reliability.py tests/e2e/test_idempotence.py tests/e2e/test_secrets.py \
	  tests/e2e/test_corpus_live.py tests/e2e/test_finops_cost.py tests/e2e/test_devops_generate_live.py \
	  $(PYTEST_ARGS)
	@OPSBENCH_E2E_FAULTS=all $(BIN)/pytest tests/e2e/test_faults.py $(PYTEST_ARGS)
	@$(BIN)/pytest -s tests/unit/test_fuzz_specs.py tests/unit/test_fuzz_outputs.py tests/unit/test_fuzz_gateway_api.py \
	  tests/unit/test_fuzz_mcp.py \
	  tests/unit/test_fuzz_agent_api.py tests/unit/test_validate_mutations.py tests/unit/test_isolation_audit.py \
	  tests/unit/test_sandbox.py \
	  tests/unit/test_secrets_scan.py $(PYTEST_ARGS)
	@OPSBENCH_REPLAY_TRIALS=10 $(BIN)/pytest tests/unit/test_replay_determinism.py $(PYTEST_ARGS)

# Property tests and API fuzzing with random exploration (hypothesis profile `fuzz`, 10x `make test`'s cases,
# OPSBENCH_FUZZ_FACTOR=N for another factor); the seed is printed first and last; SEED=<n> replays that session.
# `make test` runs the same files derandomized (profile `ci`): the same cases every run. See docs/reliability.md.
FUZZ_TESTS := tests/unit/test_fuzz_specs.py tests/unit/test_fuzz_outputs.py tests/unit/test_fuzz_gateway_api.py \
  tests/unit/test_fuzz_agent_api.py tests/unit/test_fuzz_mcp.py
SEED ?=
fuzz:
	@OPSBENCH_FUZZ=1 $(if $(SEED),OPSBENCH_FUZZ_SEED=$(SEED)) $(BIN)/pytest -s $(FUZZ_TESTS) $(PYTEST_ARGS)

test-unit:
	@$(BIN)/pytest -n $(TEST_WORKERS) tests/unit $(PYTEST_ARGS)

# The agent presets' CLIs (pinned, project-local, not part of setup: ~1.3 GB) and their tests with the real binaries.
agents:
	@$(BIN)/python -m orchestrator.agents.presets.install

test-agents:
	@$(BIN)/pytest -m agents tests/e2e/test_agent_presets.py $(PYTEST_ARGS)

AGENT_TRIALS ?= 3
bench-agents:
	@$(BIN)/python -m tests.e2e.bench_agents --trials $(AGENT_TRIALS)

lint:
	$(BIN)/ansible-lint --offline --profile production -q playbooks roles
	$(BIN)/ruff check orchestrator tests roles
	$(BIN)/mypy
	$(BIN)/mypy --strict roles/env_shop/files/app/shop

scenario:
	@test -n "$(NAME)" || { echo "usage: make scenario NAME=<scenario id> [AGENT='command']  (see: make list)"; exit 2; }
	$(BIN)/opsbench run $(NAME) $(if $(AGENT),--agent "$(AGENT)") $(if $(BACKEND),--backend $(BACKEND))

list:
	@$(BIN)/opsbench list

# Prove every SRE scenario manifests and recovers (3 repeats, no agent); IDS='a b' for some.
IDS ?=
REPEATS ?= 3
verify-scenarios:
	$(BIN)/opsbench verify-scenarios --repeats $(REPEATS) $(IDS)

# The public dev split (docs/generation.md): not committed, rebuilt from its published seed. Run it again to resume.
COUNT ?= 270
K ?= 2
CORPUS_OUT ?= $(CURDIR)/.opsbench/corpora/dev
dev-split:
	$(BIN)/opsbench corpus build --all-templates --seed opsbench-dev-1 --count $(COUNT) --parallel $(K) \
	  --out $(CORPUS_OUT); status=$$?; $(BIN)/opsbench corpus card $(CORPUS_OUT) > /dev/null; exit $$status

# A held-out split from a private seed file (docs/generation.md, 'The held-out workflow'): the seed is read from
# SEED_FILE and never printed; its card compares the baseline with the dev split and the fixed scenarios when they
# are built. Resumable like dev-split.
HELDOUT_COUNT ?= 120
HELDOUT_OUT ?= $(CURDIR)/.opsbench/corpora/heldout
# The public dev split's incidents, drawn again from its published seed (milliseconds; nothing recorded), and those of
# the splits published before the templates last changed (orchestrator/generation/published/*.txt, their digests):
# the held-out split holds none of them, nor any committed scenario (29 of the 30 templates' own values are draws of
# their spaces, and their answers are public) (--exclude).
DEV_DRAWS := $(CURDIR)/.opsbench/generated/dev-split-draws
heldout:
	@test -n "$(SEED_FILE)" || { echo "make heldout: set SEED_FILE=<a private seed file> (head -c 32 /dev/urandom | base64 > FILE)"; exit 2; }
	rm -rf $(DEV_DRAWS) && $(BIN)/opsbench generate --all-templates --seed opsbench-dev-1 --count $(COUNT) --out $(DEV_DRAWS) > /dev/null
	$(BIN)/opsbench corpus build --all-templates --seed-file $(SEED_FILE) --count $(HELDOUT_COUNT) --parallel $(K) \
	  --exclude $(DEV_DRAWS) --exclude $(CURDIR)/scenario_specs $(foreach f,$(wildcard $(CURDIR)/orchestrator/generation/published/*.txt),--exclude $(f)) --out $(HELDOUT_OUT) $(if $(RETRY),--retry-dropped); status=$$?; \
	  $(BIN)/opsbench corpus card $(HELDOUT_OUT) $(foreach c,dev fixed,$(if $(wildcard $(CURDIR)/.opsbench/corpora/$(c)/build.json),--compare $(CURDIR)/.opsbench/corpora/$(c))) > /dev/null; \
	  exit $$status

# The DevOps domain's upstream projects (docs/devops.md, 'Real projects'): each fetched through its registry at its
# pinned version and verified into the state dir's cache, then built and tested offline, one at a time at the lowest
# CPU priority (live: the registries; ~16 min from an empty cache on the 2-core machine). IDS='a b' for some;
# WHERE=workspace in the workspace image; RECORD=1 keeps the passing projects' times in
# orchestrator/devops_projects/measured.json.
WHERE ?= host
devops-projects:
	$(BIN)/opsbench devops projects --fetch --check $(WHERE) $(if $(RECORD),--record) $(IDS)

# DevOps tasks drawn from those projects (docs/devops-projects.md, 'Generated tasks'): per project and family,
# mutations and build causes drawn from the seed, each kept only when `make check` on fresh copies proves it
# (the untouched state fails, the reference passes); monitoring proven live in the workspace image; a pipeline chains
# instances of earlier draws ($(DEVOPS_TASKS_OUT) and DEVOPS_FROM); yields in $(DEVOPS_TASKS_OUT)/yields.json. Not
# committed.
DEVOPS_SEED ?= opsbench-dev-1
DEVOPS_COUNT ?= 3
DEVOPS_TASKS_OUT ?= $(CURDIR)/.opsbench/devops-tasks/dev
devops-tasks:
	nice -n 19 $(BIN)/opsbench devops generate --seed $(DEVOPS_SEED) --count $(DEVOPS_COUNT) --out $(DEVOPS_TASKS_OUT) \
	  $(foreach p,$(IDS),--project $(p)) $(foreach f,$(FAMILIES),--family $(f)) $(foreach d,$(DEVOPS_FROM),--from $(d)) \
	  $(if $(RECORD),--record)

# The full verification of the generated DevOps tasks: every instance under .opsbench/devops-tasks (or
# DEVOPS_VERIFY='folders ...') proven again from its files alone, where WHERE says (host or workspace).
DEVOPS_VERIFY ?= $(wildcard $(CURDIR)/.opsbench/devops-tasks/*)
devops-verify:
	@test -n "$(strip $(DEVOPS_VERIFY))" || { echo "make devops-verify: no generated tasks under .opsbench/devops-tasks: run make devops-tasks first"; exit 2; }
	nice -n 19 $(BIN)/opsbench devops verify-generated --where $(WHERE) $(DEVOPS_VERIFY)

validate:
	@$(BIN)/opsbench validate

docs:
	@$(BIN)/opsbench docs

bench:
	@$(BIN)/python -m orchestrator.harness.bench

bench-local:
	@$(BIN)/python -m orchestrator.harness.bench_local

# The local cluster's costs beside the local backend's (docs/performance.md, "Kubernetes backend: make bench-k8s"):
# refused while a cluster is up; it starts one and always takes it down. COLD=1 first builds cold (empty temporary Go
# caches) and warm, in temporary folders under the state dir (GBs, removed after; tens of minutes).
K8S_BENCH_TRIALS ?= 2
bench-k8s:
	@$(BIN)/opsbench bench --backend kubernetes --trials $(K8S_BENCH_TRIALS) $(if $(COLD),--cold) \
	  $(if $(K8S_RELEASE),--k8s-release $(K8S_RELEASE)) $(if $(JSON),--json)

bench-awx:
	@$(BIN)/python -m tests.e2e.awx_contract $(if $(NAME),$(NAME),loopweb-web-down) --repeats $(if $(REPEATS),$(REPEATS),3)

bench-finops:
	@$(BIN)/python -m orchestrator.finops bench --threads 2

cleanup:
	@$(BIN)/opsbench cleanup

clean:
	rm -rf .opsbench

# Live tests of the kubernetes backend (marker k8s): on the cluster that runs (make cluster, or KUBECONFIG), else skipped, saying so.
e2e-kubernetes:
	@$(BIN)/pytest -m k8s tests/e2e/test_kubernetes.py -rs $(PYTEST_ARGS)

# A single-node cluster built here from the official Go modules (roles/k8s_cluster, docs/backends.md).
K8S_RELEASE ?=
cluster:
	$(BIN)/ansible-playbook playbooks/cluster.yml $(if $(K8S_RELEASE),-e k8s_cluster_release=$(K8S_RELEASE))

cluster-build:
	$(BIN)/ansible-playbook playbooks/cluster.yml -e opsbench_cluster_build_only=true $(if $(K8S_RELEASE),-e k8s_cluster_release=$(K8S_RELEASE))

cluster-down:
	$(BIN)/ansible-playbook playbooks/cluster_down.yml

# Kyverno on the local cluster (docs/ciso.md): built from its Go module (cached), its images loaded, installed and
# waited for; kyverno-down removes it and the webhooks it registered. KUBECONFIG, if set, names another cluster.
.PHONY: kyverno kyverno-down
kyverno:
	$(BIN)/ansible-playbook playbooks/kyverno.yml

kyverno-down:
	$(BIN)/ansible-playbook playbooks/kyverno_down.yml

# The live Kubernetes smoke (CI runs it after `make test`, .ci/k8s-smoke): the local cluster up (its build cached by
# release), one SRE scenario end to end with the heuristic and the CISO cluster class scored on the live API, then
# the cluster down whatever happened. It takes down a cluster that was already up; `make e2e-kubernetes` does not.
test-k8s-smoke:
	@rc=0; $(MAKE) --no-print-directory cluster || rc=$$?; \
	if [ $$rc -eq 0 ]; then OPSBENCH_K8S_REQUIRED=1 $(BIN)/pytest -m "k8s and smoke" tests/e2e/test_kubernetes.py -rs \
	  --durations=0 $(PYTEST_ARGS) || rc=$$?; fi; \
	$(MAKE) --no-print-directory cluster-down || rc=$$(( rc ? rc : 1 )); exit $$rc

KIND_CLUSTER ?= opsbench
K8S_REGISTRY ?=
k8s-images:
	$(BIN)/ansible-playbook playbooks/k8s_images.yml -e k8s_images_kind_cluster=$(KIND_CLUSTER) $(if $(K8S_REGISTRY),-e k8s_images_registry=$(K8S_REGISTRY))

awx-export:
	$(BIN)/opsbench awx export --output awx/opsbench_awx.yml
