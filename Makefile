# SPDX-License-Identifier: GPL-2.0
#
# SMR: shared-memory sockets over RDMA.
#
#   make               build kernel/smr.ko for the newest installed 6.12 kernel
#   make KDIR=...      build against another kernel build directory
#   make module-old    smr.ko for Debian's 6.1 (build/kernels/RELEASE/)
#   make module-rt     smr.ko for 6.12 PREEMPT_RT (build/kernels/RELEASE/)
#   make modules-all   (or all-kernels) smr.ko for 6.12, 6.1 and rt
#   make modules-test  the test module for 6.12: smr.ko with the hooks only
#                      the test suites use (build/kernels/RELEASE-test/;
#                      scripts/build-copy --test NAME for other kernels)
#   make debug-kernel  build (about an hour) or reuse the debug kernel
#                      (KASAN, UBSAN, kmemleak, lockdep: scripts/debug-kernel)
#   make modules-debug smr.ko for the debug kernel (builds that if needed)
#   make check         build everything and run the test suite in QEMU guests
#                      (they boot the test module)
#   make check-debug   the whole suite on the debug kernel, 2 vCPUs a guest,
#                      plus failinject and fuzz (trinity); fails if the
#                      debug kernel is not built (make debug-kernel), never
#                      runs on another kernel; SUITES="faults churn" runs
#                      those only (the whole takes many hours: in parts)
#   make check-kernels the api and rdma suites on 6.1 and on 6.12 PREEMPT_RT,
#                      the dkms suite on 6.1 and 6.12
#   make demo          two guests, an unmodified app through smr_run
#   make bench         tcp/smr/smc/verbs benchmark in two QEMU guests
#                      (bench/README.md)
#   make style         checkpatch --strict;  make sparse: C=1 on both kernels
#   make install       install smr.ko and the user tools (tools/: smr_run, its
#                      preload library, smr-probe) on this machine
#   make dkms-install  copy the module's sources to /usr/src/smr-VERSION for
#                      DKMS (dkms.conf), then: dkms install smr/VERSION
#
# W=1 and C=1 pass through to Kbuild. Building (make, module-*, user) only
# builds; make deps installs the packages (scripts/install-deps), and the
# targets that run something (check*, demo, bench, style, sparse, install,
# debug-kernel) call it first, so the README's two commands need nothing else.

SHELL := /bin/bash
REPO := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD := $(REPO)/build
KVER_MAIN ?= 6.12
KVER_OLD ?= 6.1
KDIR ?= $(shell $(REPO)/scripts/kdir $(KVER_MAIN) 2>/dev/null)

.PHONY: all modules deps all-kernels modules-all module-old module-rt modules-test \
	debug-kernel modules-debug user check check-debug check-kernels \
	selftests style sparse demo bench install dkms-install clean

all: modules

deps:
	@$(REPO)/scripts/install-deps

modules:
	@kdir="$(KDIR)"; [ -n "$$kdir" ] || kdir=$$($(REPO)/scripts/kdir $(KVER_MAIN)); \
	$(MAKE) -C "$$kdir" M=$(REPO) modules

# Kbuild (before 6.13) builds in the source tree, so other kernels build
# from a copy of the sources under build/kernels/VERSION.
module-old:
	@$(REPO)/scripts/build-copy $(KVER_OLD)

module-rt:
	@$(REPO)/scripts/build-copy rt

modules-all: modules module-old module-rt

# The test module: SMR_TEST_HOOKS=1 adds the hooks only the test suites use
# (vm-run --module test boots it); the product module never has them.
modules-test:
	@$(REPO)/scripts/build-copy --test $(KVER_MAIN)

all-kernels: modules-all

debug-kernel: deps
	@$(REPO)/scripts/debug-kernel

modules-debug: debug-kernel
	@$(REPO)/scripts/build-copy debug

user:
	$(MAKE) -C $(REPO)/tools
	$(MAKE) -C $(REPO)/selftests
	$(MAKE) -C $(REPO)/selftests/wire
	$(MAKE) -C $(REPO)/selftests/rdma
	$(MAKE) -C $(REPO)/selftests/negot
	$(MAKE) -C $(REPO)/selftests/fuzz

selftests: user

check: deps modules modules-test user
	@$(REPO)/selftests/run_tests.sh

# An hour-long kernel build is never started implicitly: check-debug needs
# make debug-kernel (or modules-debug) first.
check-debug: deps modules user
	@$(REPO)/scripts/debug-kernel --built >/dev/null || \
		{ echo "check-debug: the debug kernel is not built: run make debug-kernel (about an hour)" >&2; exit 1; }
	@$(REPO)/scripts/debug-kernel >/dev/null
	@$(REPO)/scripts/build-copy debug
	@$(REPO)/scripts/build-copy --test debug
	@SMR_VM_KERNEL=debug SMR_VM_SMP=2 $(REPO)/selftests/run_tests.sh $(SUITES)

# DKMS builds smr.ko inside the guest (about 4 minutes under TCG): too slow
# for make check, so here, on the oldest and the newest kernel.
check-kernels: deps module-old module-rt user
	@$(REPO)/scripts/build-copy --test $(KVER_OLD)
	@$(REPO)/scripts/build-copy --test rt
	@rc=0; \
	SMR_TEST_KERNELS="$(KVER_OLD) rt" $(REPO)/selftests/run_tests.sh api rdma || rc=1; \
	SMR_TEST_KERNELS="$(KVER_OLD) $(KVER_MAIN)" $(REPO)/selftests/run_tests.sh dkms || rc=1; \
	exit $$rc

demo: deps modules user
	@$(REPO)/scripts/demo

bench: deps modules user
	@$(REPO)/scripts/bench

style: deps
	@$(REPO)/scripts/checkpatch-run

sparse: deps
	@$(REPO)/scripts/build-copy $(KVER_MAIN) C=2 W=1
	@$(REPO)/scripts/build-copy $(KVER_OLD) C=2 W=1

install: deps modules user
	@kdir="$(KDIR)"; [ -n "$$kdir" ] || kdir=$$($(REPO)/scripts/kdir $(KVER_MAIN)); \
	$(MAKE) -C "$$kdir" M=$(REPO) modules_install && depmod -a $$(basename $$(dirname $$kdir))
	$(MAKE) -C $(REPO)/tools install

# As WireGuard's: the sources, dkms.conf with the version filled in, and
# kernel/VERSION, which Kbuild reads for MODULE_VERSION where there is no
# git (so modinfo and dkms name the same version). DESTDIR for packagers.
SMR_VERSION := $(shell git -C $(REPO) describe --always --dirty 2>/dev/null || \
		 cat $(REPO)/kernel/VERSION 2>/dev/null || echo unknown)
DKMSDIR ?= /usr/src/smr-$(SMR_VERSION)

dkms-install:
	@rm -rf "$(DESTDIR)$(DKMSDIR)"
	@install -d "$(DESTDIR)$(DKMSDIR)"
	@cd $(REPO) && cp --parents Kbuild kernel/Kbuild kernel/*.c kernel/*.h \
		uapi/linux/*.h "$(DESTDIR)$(DKMSDIR)/"
	@rm -f "$(DESTDIR)$(DKMSDIR)"/kernel/*.mod.c
	@sed 's/@PACKAGE_VERSION@/$(SMR_VERSION)/' $(REPO)/dkms.conf \
		>"$(DESTDIR)$(DKMSDIR)/dkms.conf"
	@echo "$(SMR_VERSION)" >"$(DESTDIR)$(DKMSDIR)/kernel/VERSION"
	@echo "dkms-install: $(DESTDIR)$(DKMSDIR) (next: dkms install smr/$(SMR_VERSION))"

clean:
	@kdir=$$($(REPO)/scripts/kdir $(KVER_MAIN) 2>/dev/null) && \
	$(MAKE) -C "$$kdir" M=$(REPO) clean || true
	rm -rf $(BUILD)
