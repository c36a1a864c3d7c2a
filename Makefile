# SPDX-License-Identifier: GPL-2.0
# ghost: top-level build. 'make deps' installs what the project needs, 'make'
# builds userland (CMake) and ghost.ko (Kbuild, against the test VM's kernel),
# 'make check' runs every test, 'make demo' shows the product at work,
# 'make check-debug' runs the module's tests on a lockdep + KASAN kernel.

BUILD ?= build
JOBS ?= $(shell nproc)
# ghost.ko is built for the kernel the VM boots, never the running one.
KREL = $(shell tests/vm/kernel-release)
KDIR ?= /lib/modules/$(KREL)/build

.PHONY: all userland kmod deps check check-debug debug-kernel demo clean lint format install

all: userland kmod

userland:
	@test -f $(BUILD)/kselftest/include/kselftest_harness.h || \
		{ echo "kselftest headers missing: run 'make deps' first" >&2; exit 1; }
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

kmod:
	$(MAKE) -C kmod KDIR=$(KDIR)

deps:
	GHOST_BUILD=$(abspath $(BUILD)) scripts/deps

check: deps all
	GHOST_BUILD=$(abspath $(BUILD)) tests/check

# A kernel from Debian's linux-source-6.1 with lockdep, KASAN and the other
# checkers of tests/vm/debug.config (cached in $(BUILD)/debug-kernel), and
# ghost.ko built against it there; kmod/ghost.ko is left alone.
debug-kernel: deps
	GHOST_BUILD=$(abspath $(BUILD)) tests/vm/debug-kernel --jobs $(JOBS)

# The module's tests (every kselftest, the mutate and leak tests) in the VM
# booting the debug kernel; fails on any failing test or kernel report.
check-debug: deps userland debug-kernel
	GHOST_BUILD=$(abspath $(BUILD)) tests/check-debug

demo: deps all
	GHOST_BUILD=$(abspath $(BUILD)) scripts/demo

# Installs libghost (shared library, headers, pkg-config file), ghostctl and
# its man page under PREFIX (default /usr/local); DESTDIR is honoured.
PREFIX ?= /usr/local
install: userland
	cmake --install $(BUILD) --prefix $(PREFIX)

# Kernel style of the module and the uapi header (checkpatch from linux-source).
# compat.h exists to compare LINUX_VERSION_CODE, so that check is off there.
CHECKPATCH = perl $(BUILD)/kernel-scripts/checkpatch.pl --no-tree --strict --terse \
	--ignore FILE_PATH_CHANGES
lint:
	$(CHECKPATCH) -f $(filter-out %.mod.c kmod/compat.h,$(wildcard kmod/*.c kmod/*.h)) \
		uapi/linux/ghost.h common/ghost_policy.h common/ghost_format.h common/ghost_vma_attrs.h \
		common/ghost_lock.h common/ghost_creds.h
	$(CHECKPATCH) --ignore LINUX_VERSION_CODE,CONSTANT_COMPARISON -f kmod/compat.h

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD)
	-$(MAKE) -C kmod KDIR=$(KDIR) clean
