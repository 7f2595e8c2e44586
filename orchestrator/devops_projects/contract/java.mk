# OpsBench's check contract for an upstream Maven project (orchestrator/devops_projects; written beside the sources
# at fetch, protected like a project's own Makefile). Offline, from the Maven repository in $(DEPS)/m2 that the fetch
# resolved; RAT (the release audit of licence headers) is skipped: the tree is rebuilt from the published jars,
# which do not carry every file RAT expects. `build` compiles main and test code; `check` runs every test
# (reports in target/surefire-reports).
DEPS ?= /opt/opsbench-deps
MVN := mvn -B -q -o -Dmaven.repo.local=$(DEPS)/m2 -Drat.skip=true

.PHONY: build check clean

build:
	$(MVN) test-compile

check:
	$(MVN) test

clean:
	rm -rf target
