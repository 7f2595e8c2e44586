# OpsBench's check contract for an upstream Maven project (orchestrator/devops_projects; written beside the sources
# at fetch, protected like a project's own Makefile). Offline, from the Maven repository in $(DEPS)/m2 that the fetch
# resolved; RAT (the release audit of licence headers) is skipped: the tree is rebuilt from the published jars,
# which do not carry every file RAT expects. The test JVM gets a 1 GB heap: its default is a quarter of the memory,
# 512 MB in the 2 GB workspace, too little for the larger suites (commons-collections). `build` compiles main and
# test code; `check` runs every test (reports in target/surefire-reports).
DEPS ?= /opt/opsbench-deps
TEST_HEAP ?= 1g
MVN := mvn -B -q -o -Dmaven.repo.local=$(DEPS)/m2 -Drat.skip=true -DargLine=-Xmx$(TEST_HEAP)

.PHONY: build check clean

build:
	$(MVN) test-compile

check:
	$(MVN) test

clean:
	rm -rf target
