# Lockstep's single entry point. `make test` is what the README and CI run.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

LOCKSTEP_TOOLS ?= $(HOME)/.cache/lockstep/tools
export LOCKSTEP_TOOLS
TOOLS_BIN := $(LOCKSTEP_TOOLS)/bin
# Test binaries share one build. -p 3: three packages (or compilations) at once on 2 cores,
# because the long packages spend much of their time waiting (kill instants, fsyncs, restarted
# servers, envtest, pods), and a third keeps the cores busy meanwhile. engine/spark runs real
# Spark (the oracle, the differential corpus, the driver-kill test): about 15 minutes on its
# own on a busy 2-core machine, so a package may take 45.
GO_TEST_FLAGS ?= -race -timeout 60m -p 3
PKGS ?= ./...
# go test starts the packages in the order it is given them (one named twice runs once): with
# PKGS=./... the longest go first. In ./...'s own order engine/spark started among the last and
# ended cold runs alone, the cores two-thirds idle for their last ~7 minutes.
FIRST_PKGS := $(if $(filter ./...,$(PKGS)),./engine/spark ./engine/crashtest ./controller ./cmd/lockstep)

.PHONY: all build tools warm test test-short e2e e2e-short image image-spark lint generate manifests bench clean-tools help

all: build

help: ## Show the targets.
	@grep -E '^[a-z.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# VERSION is linked into the binaries (`lockstep version`; the controller's default engine
# image is the release of its version): the newest v* tag, else the commit. Empty: Go's build info.
VERSION ?= $(shell git describe --tags --match 'v*' --always --dirty 2>/dev/null)

build: ## Build bin/lockstep and bin/terraform-provider-lockstep.
	go build -ldflags "-X main.version=$(VERSION)" -o bin/ ./cmd/...

tools: ## Build every test tool into $(LOCKSTEP_TOOLS) (cached; skips what is current).
	hack/tools.sh

# With PKGS=./... the e2e suite runs beside the other packages: it mostly waits on pods and
# its Spark query, and run last it added ~12 minutes to a cold run. Its output (one package,
# printed by go test when it ends) follows the other packages'; when anything failed, the
# last lines name every failed test, so that a log cut to its end still says what failed
# (hack/test.sh).
# Before the tests: the tools, and beside them `warm` (the tools' downloads leave the cores idle).
test: ## Build the test tools, then run every test against the real services; with PKGS=./... the e2e suite too, beside them.
	@$(MAKE) --no-print-directory -j2 tools warm
	@E2E="$(if $(filter ./...,$(PKGS)),$(MAKE) --no-print-directory e2e-short)" hack/test.sh $(GO_TEST_FLAGS) $(FIRST_PKGS) $(PKGS)

# The real-node suite (e2e/, build tag e2e): needs root. -count=1 because it builds the image
# from the checkout, which Go's test cache cannot see; -race because the other test binaries
# are built so, and one set of flags compiles the dependencies once.
E2E_FLAGS ?= -race -count=1 -timeout 60m -parallel 9
e2e: tools ## Build the tools, then run the end-to-end suite on a real node (kubelet, containerd; needs root).
	go test -tags e2e $(E2E_FLAGS) ./e2e/

warm: ## Compile what the tests build into Go's build cache, linking and running nothing: the test packages (with GO_TEST_FLAGS' -race), the e2e suite, and the static lockstep of the images.
	go list $(filter -race,$(GO_TEST_FLAGS)) -export -deps -test $(PKGS) >/dev/null
	go list $(filter -race,$(E2E_FLAGS)) -tags e2e -export -deps -test ./e2e/ >/dev/null
	CGO_ENABLED=0 go list -trimpath -export -deps ./cmd/lockstep >/dev/null

e2e-short: ## Run the end-to-end suite without (re)building the tools.
	go test -tags e2e $(E2E_FLAGS) ./e2e/

# The images are tagged as the install names them (INSTALL_IMAGE, SPARK_INSTALL_IMAGE below), so
# that what `make image image-spark` builds is what `make deploy`'s or install.yaml's controller
# runs: give INSTALL_IMAGE=repo:tag to every step (charts/makefile_test.go keeps the defaults equal).
image: ## Build the lockstep image tarball bin/lockstep-image.tar without Docker (IMAGE=ref, default $(INSTALL_IMAGE); VERSION=v).
	go run ./hack/image -ref $(IMAGE) -version $(VERSION) -out bin/lockstep-image.tar
IMAGE ?= $(INSTALL_IMAGE)

image-spark: ## Build Lockstep's Spark image bin/lockstep-spark-image.tar without Docker (SPARK_IMAGE=ref, default $(SPARK_INSTALL_IMAGE); VERSION=v; docs/spark.md).
	hack/tools.sh spark_image
	go run ./hack/image-spark -ref $(SPARK_IMAGE) -version $(VERSION) -out bin/lockstep-spark-image.tar
SPARK_IMAGE ?= $(SPARK_INSTALL_IMAGE)

test-short: ## Run the tests without (re)building the tools.
	go test $(GO_TEST_FLAGS) $(FIRST_PKGS) $(PKGS)

lint: ## gofmt check, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	go vet -tags e2e ./e2e/
	@hack/tools.sh staticcheck >/dev/null
	$(TOOLS_BIN)/staticcheck ./...

generate: ## Regenerate deepcopy, CRDs and reference docs.
	@hack/tools.sh controller_gen >/dev/null
	$(TOOLS_BIN)/controller-gen object paths=./api/...
	$(TOOLS_BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/crddesc config/crd/bases/*.yaml
	cp config/crd/bases/*.yaml charts/lockstep/crds/
	go generate ./compat/...
	@hack/tools.sh terraform >/dev/null
	PATH="$(TOOLS_BIN):$$PATH" go generate ./provider/...

manifests: generate ## Alias of generate, as kubebuilder projects name it.
	$(TOOLS_BIN)/controller-gen rbac:roleName=controller webhook paths=./controller/... output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook

BENCH ?= .
BENCH_FLAGS ?= -benchmem
bench: ## Run the benchmarks, then print one table of the goals (hack/benchtable/goals.txt): figure, target, met or not.
	@mkdir -p bin
	go test -run '^$$' -bench '$(BENCH)' $(BENCH_FLAGS) $(PKGS) | go run ./hack/benchtable -goals hack/benchtable/goals.txt | tee bin/bench.txt

clean-tools: ## Remove the tool cache.
	rm -rf $(LOCKSTEP_TOOLS)

.PHONY: render deploy undeploy install.yaml
KUSTOMIZE ?= kubectl kustomize
export KUSTOMIZE
OVERLAY ?= config/default
# RELEASE is the Lockstep release this checkout installs: the chart's appVersion.
RELEASE ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/lockstep/Chart.yaml)
# INSTALL_IMAGE is the controller's and engines' image in what render, install.yaml and deploy write.
INSTALL_IMAGE ?= ghcr.io/lockstep-dev/lockstep:$(RELEASE)
# SPARK_INSTALL_IMAGE runs spark queries' drivers and executors (make image-spark) in what they
# write: by default INSTALL_IMAGE's repository with -spark, at the same tag (none for a digest:
# name it then, its digest differs).
SPARK_INSTALL_IMAGE ?= $(if $(findstring @,$(INSTALL_IMAGE)),,$(shell echo '$(INSTALL_IMAGE)' | sed 's/:\([^:/]*\)$$/-spark:\1/'))

render: ## Print the install manifests of $(OVERLAY) with the images pinned to $(INSTALL_IMAGE) and $(SPARK_INSTALL_IMAGE).
	@hack/install-manifests.sh $(OVERLAY) $(INSTALL_IMAGE) $(SPARK_INSTALL_IMAGE)

install.yaml: ## Write bin/install.yaml, the release's manifests: config/default (cert-manager), images $(INSTALL_IMAGE) and $(SPARK_INSTALL_IMAGE).
	@mkdir -p bin
	hack/install-manifests.sh config/default $(INSTALL_IMAGE) $(SPARK_INSTALL_IMAGE) > bin/install.yaml
	@echo "wrote bin/install.yaml for $(INSTALL_IMAGE) and $(SPARK_INSTALL_IMAGE)"

# deploy and undeploy change no tracked file and regenerate nothing: run `make manifests` first
# when the markers changed.
deploy: ## Install Lockstep into the current kubectl context (OVERLAY=config/dev without cert-manager).
	hack/install-manifests.sh $(OVERLAY) $(INSTALL_IMAGE) $(SPARK_INSTALL_IMAGE) | kubectl apply --server-side -f -

# The queries and stores go first, while the controller still runs to release their
# finalizers; then everything else, CRDs included.
undeploy: ## Remove every StreamingQuery and CheckpointStore, then what deploy installed.
	-kubectl delete streamingqueries --all --all-namespaces --timeout=5m
	-kubectl delete checkpointstores --all --timeout=2m
	hack/install-manifests.sh $(OVERLAY) $(INSTALL_IMAGE) $(SPARK_INSTALL_IMAGE) | kubectl delete --ignore-not-found -f -

# The Terraform provider, installed without a registry (docs/terraform/guides/install.md).
# PROVIDER_VERSION is semver without the v: the newest v* tag, else 0.0.1 (Terraform skips 0.0.0).
.PHONY: install-provider provider-release
PROVIDER_VERSION ?= $(patsubst v%,%,$(shell git describe --tags --match 'v*' --abbrev=0 2>/dev/null || echo v0.0.1))
PROVIDER_MIRROR ?= $(HOME)/.terraform.d/plugins
PROVIDER_PLATFORMS ?= linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64
PROVIDER_DIST ?= dist/provider
PROVIDER_SOURCE := registry.terraform.io/lockstep-dev/lockstep

install-provider: ## Build the Terraform provider for this machine into a filesystem mirror (PROVIDER_MIRROR, PROVIDER_VERSION).
	dir="$(PROVIDER_MIRROR)/$(PROVIDER_SOURCE)/$(PROVIDER_VERSION)/$$(go env GOOS)_$$(go env GOARCH)"; \
	mkdir -p "$$dir"; \
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(PROVIDER_VERSION)" -o "$$dir/terraform-provider-lockstep_v$(PROVIDER_VERSION)$$(go env GOEXE)" ./cmd/terraform-provider-lockstep; \
	echo "Installed $(PROVIDER_SOURCE) $(PROVIDER_VERSION) in $$dir"

provider-release: ## Build the provider's release artifacts in PROVIDER_DIST: a zip per platform, the manifest, SHA256SUMS (signed when GPG_KEY is set).
	rm -rf "$(PROVIDER_DIST)"; mkdir -p "$(PROVIDER_DIST)"; \
	name=terraform-provider-lockstep_$(PROVIDER_VERSION); \
	for p in $(PROVIDER_PLATFORMS); do \
	  os=$${p%_*}; arch=$${p#*_}; ext=; if [ "$$os" = windows ]; then ext=.exe; fi; \
	  tmp=$$(mktemp -d); \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "-s -w -X main.version=$(PROVIDER_VERSION)" \
	    -o "$$tmp/terraform-provider-lockstep_v$(PROVIDER_VERSION)$$ext" ./cmd/terraform-provider-lockstep; \
	  (cd "$$tmp" && zip -q -X "$$name"_"$$p".zip "terraform-provider-lockstep_v$(PROVIDER_VERSION)$$ext"); \
	  mv "$$tmp/$$name"_"$$p".zip "$(PROVIDER_DIST)/"; rm -rf "$$tmp"; \
	done; \
	cp cmd/terraform-provider-lockstep/terraform-registry-manifest.json "$(PROVIDER_DIST)/$${name}_manifest.json"; \
	(cd "$(PROVIDER_DIST)" && sha256sum "$$name"_*.zip "$${name}_manifest.json" > "$${name}_SHA256SUMS"); \
	if [ -n "$${GPG_KEY:-}" ]; then gpg --batch --local-user "$$GPG_KEY" --detach-sign "$(PROVIDER_DIST)/$${name}_SHA256SUMS"; fi; \
	ls -1 "$(PROVIDER_DIST)"
