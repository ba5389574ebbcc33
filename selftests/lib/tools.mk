# SPDX-License-Identifier: GPL-2.0
#
# What the Makefiles of the guest-side test tools share (included by
# selftests/rdma/Makefile and selftests/negot/Makefile): where things are,
# the flags, and the connection engine (engine.c) the traffic tools link.
# The including Makefile sets HERE (its own directory), O (the build
# directory) and PROGS first.

SMR_TOP := $(abspath $(HERE)/../..)
SMR_LIB := $(SMR_TOP)/selftests/lib
override O := $(abspath $(O))

CC ?= cc
CFLAGS ?= -O2
SMR_CFLAGS := -Wall -Wextra -Werror -g -I$(SMR_TOP)/uapi -I$(SMR_TOP)/selftests \
	      -I$(SMR_LIB)
SMR_HEADERS := $(SMR_TOP)/selftests/smr_test_lib.h $(SMR_TOP)/uapi/linux/smr.h
ENGINE := $(SMR_LIB)/engine.c $(SMR_LIB)/engine.h

.PHONY: all clean
all: $(PROGS)

$(O):
	mkdir -p $@

clean:
	rm -f $(PROGS)
