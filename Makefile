# mltune top-level build. Run as root on Debian 12 (bookworm).
#
#   make run        set up, build, boot the newest kernel and show mltune end
#                   to end (tests/vm/guest/demo): ends on a verified node
#   make check      set up, build, run every test (unit, lint, kselftests in
#                   guests of every matrix kernel, the Debian packages on a
#                   systemd guest); ends "N passed, N failed, N skipped"
#   make check-under-load   the same with stress-ng loading this machine and
#                   every guest from start to end
#
# Other targets: deps, build, kmod, kmod-<series>, selftests, ksft-dropin, userspace, unit,
# asan, fuzz, vm-check, vm-failpaths, lint, lint-tidy, checkpatch, sparse,
# dkms-check, dkms-install, deb, node-test, fleet-test, bench, clean.
# Kernel matrix: scripts/kernel-matrix, the one list (scripts/kernels.sh
# resolves it; override the exact versions with MLTUNE_KVER_6_1=...,
# MLTUNE_KVER_6_12_rt=..., MLTUNE_KVER_7_2=...). MATRIX: every kernel the
# module builds for (compile-only ones included); BOOT: those a guest boots.

SHELL := /bin/bash
ROOT := $(CURDIR)
BUILD := $(ROOT)/build
MATRIX := $(shell scripts/kernels.sh matrix build)
BOOT := $(shell scripts/kernels.sh matrix boot)
KERNEL ?= $(lastword $(BOOT))
# Same cache as scripts/kernels.sh: $MLTUNE_CACHE is the mltune directory itself.
CACHE := $(or $(MLTUNE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mltune)
JOBS ?= $(shell nproc)
# Compiler cache outside the tree: a clean clone rebuilds from it.
export CCACHE_DIR ?= $(CACHE)/ccache
# Paths relative to the tree, so clones at other paths share the cache.
export CCACHE_BASEDIR ?= $(ROOT)
export CCACHE_NOHASHDIR ?= 1
CMAKE_LAUNCHER := $(if $(shell command -v ccache),-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: all deps ensure-deps build userspace kmod selftests vm-prereqs unit \
	asan asan-build fuzz fuzz-build ksft-dropin vm-failpaths vm-check check check-under-load run lint checkpatch sparse dkms-check bench \
	dkms-install lint-tidy deb node-test fleet-test clean $(addprefix kmod-,$(MATRIX))

all: build

deps:
	@scripts/deps.sh

# Quick check first: 'make run' and 'make check' install only what is missing.
ensure-deps:
	@scripts/deps.sh --check || scripts/deps.sh

build: userspace kmod selftests

# ---- user space (C++20, CMake) ---------------------------------------------
# The sched_ext scheduler in bpf/ is compiled against the BTF of the newest
# matrix kernel's headers, which live in its sid build chroot.
SCX_KVER = $(shell scripts/kernels.sh resolve $(lastword $(BOOT)) 2>/dev/null)
SCX_BTF = $(CACHE)/sid-chroot-$(SCX_KVER)/usr/src/linux-headers-$(SCX_KVER)/vmlinux

userspace:
	@[ -z "$(SCX_KVER)" ] || scripts/sid-chroot.sh ensure $(SCX_KVER) >/dev/null
	@if [ -f CMakeLists.txt ]; then \
		cmake -S . -B $(BUILD)/userspace -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_LAUNCHER) \
			$(if $(SCX_KVER),-DMLTUNE_SCX_BTF=$(SCX_BTF)) \
			-DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null && \
		cmake --build $(BUILD)/userspace -j $(JOBS); \
	fi

unit: userspace
	ctest --test-dir $(BUILD)/userspace --output-on-failure -j $(JOBS)

asan-build:
	cmake -S . -B $(BUILD)/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMLTUNE_SANITIZE=ON $(CMAKE_LAUNCHER) >/dev/null
	cmake --build $(BUILD)/asan -j $(JOBS)

asan: asan-build
	ctest --test-dir $(BUILD)/asan --output-on-failure -j $(JOBS) -LE fuzz

# The fuzz targets and the library they drive, nothing else (the unit tests
# and mltunectl build in the normal and the ASan build).
fuzz-build:
	CC=clang-16 CXX=clang++-16 cmake -S . -B $(BUILD)/fuzz -G Ninja -DMLTUNE_FUZZ=ON -DMLTUNE_TESTS=OFF $(CMAKE_LAUNCHER) >/dev/null
	cmake --build $(BUILD)/fuzz -j $(JOBS) --target fuzz_targets

fuzz: fuzz-build
	ctest --test-dir $(BUILD)/fuzz --output-on-failure -L fuzz

# ---- kernel module, one build per matrix kernel ---------------------------
# 6.1 and 6.12 build on the host against the Debian headers; 7.2's kbuild
# tools need sid's glibc, so it builds in the cached sid chroot.
kmod: $(addprefix kmod-,$(MATRIX))

$(addprefix kmod-,$(MATRIX)): kmod-%:
	@kver=$$(scripts/kernels.sh resolve $*) || exit 1; \
	out=$(BUILD)/kmod/$$kver; mkdir -p $$out; \
	cp -a kmod/. $$out/ 2>/dev/null; rm -rf $$out/generated/.probes; \
	case $$kver in \
	7.*) scripts/sid-chroot.sh ensure $$kver >/dev/null && \
	     scripts/sid-chroot.sh run $$kver make -s -C /src/build/kmod/$$kver \
		KDIR=/usr/src/linux-headers-$$kver PROFILES=/src/userspace/profiles modules ;; \
	*)   kdir=$$(scripts/kernels.sh headers $*) || exit 1; cc=; \
	     [ "$$(scripts/kernels.sh use $*)" = build ] && cc=CC=gcc-12; \
	     make -s -C $$out KDIR=$$kdir $$cc \
		PROFILES=$(ROOT)/userspace/profiles modules ;; \
	esac && echo "kmod: $$out/mltune.ko"

# ---- kselftests -----------------------------------------------------------
# lib.mk and the kselftest headers come from linux-source-6.12; the suite is
# built exactly as it would be in a kernel tree (tools/testing/selftests/mltune).
KSFT := $(BUILD)/ksft/tools/testing/selftests
LINUX_SRC_TAR := $(firstword $(wildcard /usr/src/linux-source-6.12.tar.xz))

# Also the selftests' own Makefile, runner and packaging scripts (the
# kernel-tree build, make ksft-dropin); run_kselftest.sh marks a complete copy.
KSFT_STAMP := $(KSFT)/run_kselftest.sh
$(KSFT_STAMP):
	@[ -n "$(LINUX_SRC_TAR)" ] || { echo "selftests: linux-source-6.12 missing: run 'make deps'" >&2; exit 1; }
	@rm -rf $(BUILD)/ksft.tmp && mkdir -p $(BUILD)/ksft.tmp
	tar -xJf $(LINUX_SRC_TAR) -C $(BUILD)/ksft.tmp --strip-components=1 \
		--wildcards --no-wildcards-match-slash '*/tools/testing/selftests/lib.mk' \
		'*/tools/testing/selftests/Makefile' '*/tools/testing/selftests/*.sh' \
		'*/tools/testing/selftests/kselftest/*' '*/scripts/subarch.include' \
		'*/tools/testing/selftests/kselftest.h' \
		'*/tools/testing/selftests/kselftest_harness.h' \
		'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch'
	@rm -rf $(BUILD)/ksft && mv $(BUILD)/ksft.tmp $(BUILD)/ksft

selftests: $(KSFT_STAMP)
	@rm -rf $(KSFT)/mltune && cp -a tests/selftests/mltune $(KSFT)/mltune
	@mkdir -p $(BUILD)/selftests/mltune
	@$(MAKE) -s -C $(KSFT)/mltune OUTPUT=$(BUILD)/selftests/mltune \
		MLTUNE_UAPI=$(ROOT)/kmod/include/uapi all
	@$(MAKE) -s -C $(KSFT)/mltune OUTPUT=$(BUILD)/selftests/mltune \
		MLTUNE_UAPI=$(ROOT)/kmod/include/uapi emit_tests | \
		sed -nE "s/^[^:]*:([^:]+)$$/\1/p" > $(BUILD)/selftests/mltune/kselftest-list.txt
	@test -s $(BUILD)/selftests/mltune/kselftest-list.txt || \
		{ echo "selftests: no test in TEST_GEN_PROGS" >&2; exit 1; }
	@cp tests/selftests/mltune/settings $(BUILD)/selftests/mltune/settings

# The suite dropped into a kernel tree (linux-source-6.12) as kernel CI
# builds it: make -C tools/testing/selftests TARGETS=mltune, install,
# run_kselftest.sh -l, gen_tar (scripts/ksft-dropin.sh).
ksft-dropin: selftests
	@scripts/ksft-dropin.sh

# Everything tests/vm/run puts into a guest of $(KERNEL).
vm-prereqs: kmod-$(KERNEL) selftests userspace

# ---- tests ----------------------------------------------------------------
vm-check: build
	@scripts/check.sh --vm-only

check: ensure-deps
	@scripts/check.sh

# The whole check under a CPU and memory load here and in every guest
# (stress-ng): no suite may depend on an idle machine.
check-under-load: ensure-deps
	@scripts/check.sh --load

# Proves the VM bed's failure detection: hang, WARN on load, failing test.
vm-failpaths: $(KSFT_STAMP)
	@tests/vm/failpaths/run

lint: checkpatch sparse
	scripts/lint-userspace.sh

lint-tidy: userspace
	scripts/lint-userspace.sh --tidy

# checkpatch.pl --strict from linux-source-6.12 over every module source.
checkpatch: $(KSFT_STAMP)
	$(BUILD)/ksft/scripts/checkpatch.pl --strict --no-tree --quiet --show-types \
		--ignore FILE_PATH_CHANGES -f kmod/*.c kmod/*.h kmod/probes/*.c \
		kmod/include/*.h $(wildcard kmod/include/uapi/linux/*.h) && echo "checkpatch: clean"

sparse: kmod-6.12
	@kver=$$(scripts/kernels.sh resolve 6.12); out=$(BUILD)/kmod/$$kver; \
	kdir=$$(scripts/kernels.sh headers 6.12) || exit 1; \
	make -s -C $$kdir M=$$out C=2 CHECK="sparse -Wno-decl" W=1 modules 2>&1 | \
		tee $(BUILD)/sparse.log | grep -E 'warning|error' && { echo "sparse: findings above" >&2; exit 1; } || \
		echo "sparse: clean ($$kver)"

dkms-check:
	@scripts/dkms-check.sh

# Benchmarks (ratios side by side in one run, medians over repeats). The
# guest ones boot a VM; switch_vs_tuned and sched_latency change host
# settings as root and restore them. Results: bench/*/README.md.
BENCHES ?= switch hugepool nic plan switch_vs_tuned sched_latency feeder noise
bench: build
	@failed=""; for b in $(BENCHES); do echo "==== bench/$$b"; bench/$$b/run.sh || failed="$$failed $$b"; done; \
		if [ -n "$$failed" ]; then echo "bench: target missed or run failed in:$$failed"; exit 1; fi

# On a real node: install the module through DKMS for the running kernel.
dkms-install:
	@scripts/dkms-check.sh --install $(KVER)

# ---- Debian packages --------------------------------------------------------
# mltune-dkms and mltunectl (debian/), built with dpkg-buildpackage in a copy
# of the tree (the files git tracks or would track), so the tree stays clean;
# the packages land in build/deb. lintian must report no error and no
# warning (overrides carry their reason in debian/*.lintian-overrides).
DEB := $(BUILD)/deb
deb:
	@[ -z "$(SCX_KVER)" ] || scripts/sid-chroot.sh ensure $(SCX_KVER) >/dev/null
	@rm -rf $(DEB) && mkdir -p $(DEB)/src
	@git ls-files -co --exclude-standard | while read -r f; do [ -e "$$f" ] && printf '%s\n' "$$f"; done | \
		tar -cf - -T - | tar -xf - -C $(DEB)/src
	@cd $(DEB)/src && CCACHE_BASEDIR=$(DEB)/src DEB_BUILD_OPTIONS=parallel=$(JOBS) \
		MLTUNE_SCX_BTF=$(if $(wildcard $(SCX_BTF)),$(SCX_BTF)) MLTUNE_CMAKE_ARGS="$(CMAKE_LAUNCHER)" \
		dpkg-buildpackage -us -uc -b >$(DEB)/build.log 2>&1 || \
		{ tail -n 40 $(DEB)/build.log; echo "deb: dpkg-buildpackage failed (log: $(DEB)/build.log)" >&2; exit 1; }
	@rm -rf $(DEB)/src
	@ls $(DEB)/*.deb
	@lintian --fail-on error,warning $(DEB)/mltune_*.changes 2> >(grep -v 'root privileges' >&2) && \
		echo "lintian: 0 errors, 0 warnings ($$(grep -c '^[a-z]' debian/*.lintian-overrides) overrides, each with its reason in debian/*.lintian-overrides)"

# The packages on a Debian systemd guest (tests/node/run): install, boot,
# check, purge. TAP ending "N passed, N failed".
node-test: deb
	@tests/node/run

# Kubernetes manifests, container mode, Slurm and Ansible (tests/fleet/run).
fleet-test: deb
	@tests/fleet/run

# ---- run ------------------------------------------------------------------
# The demo (tests/vm/guest/demo, booted by tests/vm/run-demo) on the newest
# matrix kernel: the node as found, provisioning, the operator, the feeder
# cores, one summary line per step. tests/host-vm/demo.sh checks it.
run: ensure-deps build
	@tests/vm/run-demo --kernel $(lastword $(BOOT))

clean:
	rm -rf $(BUILD)
	@if kdir=$$(scripts/kernels.sh headers --cached 6.12 2>/dev/null); then \
		$(MAKE) -C kmod clean KDIR=$$kdir >/dev/null 2>&1 || true; else rm -rf kmod/generated; fi
