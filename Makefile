# SPDX-License-Identifier: Apache-2.0
# stripefs: the two quick-start commands are `make run` and `make test`.
BUILD ?= build
POOL ?= $(CURDIR)/pool
MNT ?= $(CURDIR)/mnt
JOBS ?= $(shell nproc)
STRIPEFS := $(BUILD)/tools/stripefs

# Debian packages the build, the tests and the benchmarks need.
PACKAGES := build-essential cmake pkg-config git \
  libfuse3-dev fuse3 librocksdb-dev liburing-dev libssl-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev prometheus-cpp-dev \
  fio sqlite3 rsync attr python3 python3-matplotlib psmisc util-linux \
  rpm dpkg-dev man-db systemd prometheus curl \
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc etcd-server etcd-client \
  pybind11-dev python3-dev python3-pytest python3-numpy
# (prometheus: the server and promtool for the metrics test; rpm: rpmbuild and rpm for `make package` and its test; dpkg-dev:
# dpkg-shlibdeps for the .deb's library dependencies; man-db: man -w and
# groff for the man page checks; systemd: systemd-analyze verify of the unit;
# gRPC and protobuf: the etcd metadata store; etcd-server and etcd-client: the
# etcd cluster its tests start; pybind11, python3-dev, pytest and numpy: the
# Python module and its tests.)

.PHONY: deps build test sanitize run stop clean package install

# Installs only what is missing (apt-get update runs once, and only if needed).
deps:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "all build and test packages are installed"; fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# Every test: first the sanitizer runs (see below), then the whole suite on
# the normal build, whose ctest summary ends the output.
test: build sanitize
	cd $(BUILD) && ctest --output-on-failure -j1

# AddressSanitizer + UndefinedBehaviorSanitizer: the unit tests and a short
# integration run (the daemon itself under ASan/UBSan); ThreadSanitizer: the
# engine's concurrent unit tests. Separate build trees, benchmarks left out.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -DSTRIPEFS_SANITIZE=address,undefined -DSTRIPEFS_BUILD_BENCH=OFF >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS) --target stripefs stripefs_unit_tests
	cd $(ASAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j1 -L unit
	cd $(ASAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j1 -R 'integration\.(cp_tree|posix|errors|kill9)$$'
	cmake -S . -B $(TSAN_BUILD) -DSTRIPEFS_SANITIZE=thread -DSTRIPEFS_BUILD_BENCH=OFF >/dev/null
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target stripefs_unit_tests
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/tests/tsan.supp ctest --output-on-failure -j1 -R '(Concurrent|ReclaimTwice|WaitedForAnotherPass)'

# Installs what the packages hold, under /usr as they do: the binary, the
# Python module (in /usr/lib/python3/dist-packages, where Debian's python3
# looks), the mount helper, the unit, man pages, completion and docs.
install: build
	cmake --install $(BUILD) --prefix /usr

# Formats a default pool (4 drive files of 1 GiB and a 256 MiB RAM segment) once, and mounts it at ./mnt.
run: build
	@mkdir -p $(MNT)
	@if mountpoint -q $(MNT); then echo "$(MNT) is already mounted"; else \
	  if [ ! -e $(POOL)/meta/CURRENT ]; then \
	    mkdir -p $(POOL) && $(STRIPEFS) mkfs --meta $(POOL)/meta \
	      --drive $(POOL)/drive0.img:1G --drive $(POOL)/drive1.img:1G \
	      --drive $(POOL)/drive2.img:1G --drive $(POOL)/drive3.img:1G --ram 256M; fi; \
	  $(STRIPEFS) mount $(POOL)/meta $(MNT); fi
	@echo
	@echo "stripefs is mounted at $(MNT). Next:"
	@echo "  cp -a /usr/share/doc $(MNT)/        # use it like any directory"
	@echo "  $(STRIPEFS) placement $(MNT)/FILE    # where each chunk of a file lives"
	@echo "  $(STRIPEFS) df $(MNT)                # per-drive capacity and use"
	@echo "  umount $(MNT)                        # unmount (make stop does the same)"
	@echo "  $(STRIPEFS) fsck $(POOL)/meta        # check the unmounted pool"

# Debian and RPM packages in dist/: dist/stripefs_VERSION_ARCH.deb and
# dist/stripefs-VERSION-1.ARCH.rpm (CPack, see cmake/packaging.cmake and
# docs/operations.md). They are made from the same $(BUILD) tree as `make
# build`, not a second one: the packages install under /usr whatever that
# tree's CMAKE_INSTALL_PREFIX is, and the files that name the binary's path
# get it when CPack installs them, so a separate /usr-prefixed build would
# only cost a second full compile. The binary is stripped in the packages.
package: build
	@mkdir -p dist && rm -f dist/stripefs_*.deb dist/stripefs-*.rpm
	cpack --config $(BUILD)/CPackConfig.cmake -B $(abspath $(BUILD))/cpack -D CPACK_OUTPUT_FILE_PREFIX=$(CURDIR)/dist
	@ls -l dist/stripefs_*.deb dist/stripefs-*.rpm

stop:
	@if mountpoint -q $(MNT); then umount $(MNT) && echo "unmounted $(MNT)"; else echo "$(MNT) is not mounted"; fi

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
