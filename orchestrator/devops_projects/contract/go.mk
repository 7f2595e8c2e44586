# OpsBench's check contract for an upstream Go module (orchestrator/devops_projects; written beside the sources at
# fetch, protected like a project's own Makefile). Offline: the module proxy is off, the standard library only.
# `build` compiles every package and its tests; `check` runs every test, verbose, kept in test-report.txt.
GOPROXY := off
GOFLAGS := -mod=readonly
GOTOOLCHAIN := local
export GOPROXY GOFLAGS GOTOOLCHAIN

.PHONY: build check clean

build:
	go build ./...
	go test -count=1 -run '^$$' ./... > /dev/null

check:
	go test -count=1 -v ./... > test-report.txt 2>&1; rc=$$?; tail -n 15 test-report.txt; exit $$rc

clean:
	rm -f test-report.txt
