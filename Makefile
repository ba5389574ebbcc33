# SPDX-License-Identifier: GPL-2.0
#
# SMR: shared-memory sockets over RDMA.
#
#   make               build kernel/smr.ko for the newest installed 6.12 kernel
#   make KDIR=...      build against another kernel build directory
#   make all-kernels   build for 6.12 and 6.1 (6.1 in build/kernels/)
#   make check         build everything and run the test suite in QEMU guests
#   make demo          two guests, an unmodified app through smr_run
#   make bench         tcp/smr/smc/verbs benchmark in two QEMU guests
#                      (bench/README.md)
#   make style         checkpatch --strict;  make sparse: C=1 on both kernels
#   make install       install smr.ko, smr_run and its library on this machine
#
# W=1 and C=1 pass through to Kbuild. Every target installs what it needs
# with scripts/install-deps first.

SHELL := /bin/bash
REPO := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD := $(REPO)/build
KVER_MAIN ?= 6.12
KVER_OLD ?= 6.1
KDIR ?= $(shell $(REPO)/scripts/kdir $(KVER_MAIN) 2>/dev/null)

.PHONY: all modules deps all-kernels module-old user check selftests \
	style sparse demo bench install clean

all: modules

deps:
	@$(REPO)/scripts/install-deps

modules: deps
	@kdir="$(KDIR)"; [ -n "$$kdir" ] || kdir=$$($(REPO)/scripts/kdir $(KVER_MAIN)); \
	$(MAKE) -C "$$kdir" M=$(REPO) modules

# Kbuild (before 6.13) builds in the source tree, so other kernels build
# from a copy of the sources under build/kernels/VERSION.
module-old: deps
	@$(REPO)/scripts/build-copy $(KVER_OLD)

all-kernels: modules module-old

user: deps
	$(MAKE) -C $(REPO)/scripts
	$(MAKE) -C $(REPO)/selftests
	$(MAKE) -C $(REPO)/selftests/wire
	$(MAKE) -C $(REPO)/selftests/rdma

selftests: user

check: modules user
	@$(REPO)/selftests/run_tests.sh

demo: modules user
	@$(REPO)/scripts/demo

bench: modules user
	@$(REPO)/scripts/bench

style: deps
	@$(REPO)/scripts/checkpatch-run

sparse: deps
	@$(REPO)/scripts/build-copy $(KVER_MAIN) C=2 W=1
	@$(REPO)/scripts/build-copy $(KVER_OLD) C=2 W=1

install: modules user
	@kdir="$(KDIR)"; [ -n "$$kdir" ] || kdir=$$($(REPO)/scripts/kdir $(KVER_MAIN)); \
	$(MAKE) -C "$$kdir" M=$(REPO) modules_install && depmod -a $$(basename $$(dirname $$kdir))
	$(MAKE) -C $(REPO)/scripts install

clean:
	@kdir=$$($(REPO)/scripts/kdir $(KVER_MAIN) 2>/dev/null) && \
	$(MAKE) -C "$$kdir" M=$(REPO) clean || true
	rm -rf $(BUILD)
