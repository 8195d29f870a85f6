# aibox: one GNU Makefile for the library, the tools, the guest init, the tests.
#
# Knobs (make VAR=value):
#   V=1          print every command
#   SANITIZE=1   build with AddressSanitizer and UndefinedBehaviorSanitizer
#   CC, CFLAGS, LDFLAGS   the usual; CFLAGS defaults to -O2 -g
#   PREFIX       where `make install` puts things (default /usr/local)
#   DESTDIR      staging root for `make install`
#   FUZZ_SECONDS how long each fuzzer runs in `make fuzz-run` (default 60)
#   DEB_MAINTAINER  the Maintainer field of `make deb`'s package
#
# Targets:
#   all (default)  build/libaibox.a, build/aibox and every build/aibox-* tool
#   check          build, then run the test suite (t/run), ending "N passed, N failed"
#   check-cold     build, then run the task suite (TASK_SUITE below) with snapshots
#                  off (AIBOX_SNAPSHOT=0: every task VM boots cold; docs/image.md)
#   demo           build, then run one task on a sample repository (t/demo)
#   deps           install the Debian packages listed in packages.txt: as root
#                  itself, as anyone else through sudo (refused without sudo)
#   install        aibox into PREFIX/bin, the tools into PREFIX/libexec/aibox,
#                  man pages into PREFIX/share/man, data into PREFIX/share/aibox,
#                  shell completion into PREFIX/share/bash-completion and
#                  PREFIX/share/zsh (vendor-completions for /usr, else site-functions);
#                  through sudo when DESTDIR/PREFIX is not the user's to write
#   deb            build/aibox_VERSION_ARCH.deb with dpkg-deb, laid out as
#                  `make install PREFIX=/usr` (no network; docs/package.md)
#   fuzz           build the libFuzzer targets in fuzz/ (clang)
#   fuzz-run       run each fuzzer for FUZZ_SECONDS on its corpus
#   format         clang-format every C file
#   format-check   fail, naming them, if `make format` would change a C file (t/check-format)
#   clean

VERSION = 0.1.0
PREFIX ?= /usr/local
B = build

CC ?= cc
CFLAGS ?= -O2 -g
PKGS = libgit2 yaml-0.1 openssl libssh2 libseccomp jansson zlib libsystemd

WARNINGS = -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wformat-security \
	-Wstrict-prototypes -Wmissing-prototypes -Wold-style-definition \
	-Wpointer-arith -Wvla -Wundef -Wno-unused-parameter -Wno-missing-field-initializers

SAN_FLAGS =
ifeq ($(SANITIZE),1)
SAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
endif

# The guest's programs (build/aibox-init: PID 1 and the SSH session's program
# in every VM) are built without AddressSanitizer, also under SANITIZE=1:
# under TCG, ASan's start and exit cost about a second more each time the init
# runs, and every task runs it twice (the restore's re-exec, the session), so
# every VM test paid for it (docs/performance.md, "The guest's init without
# AddressSanitizer").  They keep UndefinedBehaviorSanitizer, whose cost there
# was not measurable.  The init's code stays under both where it runs on the
# host: test-init-task links the init's parts and the library as the host's
# tools are built.  Under SANITIZE=1 the guest's objects are built again in
# $(G) (build/guest), otherwise they are the host's.
GUEST_SAN_FLAGS =
G = $(B)
ifeq ($(SANITIZE),1)
GUEST_SAN_FLAGS = -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
G = $(B)/guest
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# -ffile-prefix-map: no build folder in the binaries (debug info, __FILE__), so
# every tree builds the same aibox-init and the image store's boot key, which
# hashes it, does not change with the folder a tree was built in.
ALL_CFLAGS = -std=gnu11 -D_GNU_SOURCE -DAIBOX_VERSION='"$(VERSION)"' -Icommon \
	$(WARNINGS) $(PKG_CFLAGS) $(SAN_FLAGS) -fstack-protector-strong \
	-D_FORTIFY_SOURCE=2 -ffile-prefix-map=$(CURDIR)=. $(CFLAGS)
ALL_LDFLAGS = $(SAN_FLAGS) -Wl,--as-needed -Wl,-z,relro,-z,now $(LDFLAGS)
LIBS = $(PKG_LIBS) -lz

ifneq ($(V),1)
Q = @
QCC = @echo '   CC   ' $@;
QLD = @echo '   LINK ' $@;
QAR = @echo '   AR   ' $@;
endif

LIB_SRC := $(sort $(wildcard common/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
TOOL_SRC := $(sort $(wildcard tools/aibox-*.c))
TOOLS := $(TOOL_SRC:tools/%.c=$(B)/%)
IMAGE_SRC := $(sort $(wildcard image/aibox-*.c))
IMAGE_PROGS := $(IMAGE_SRC:image/%.c=$(B)/%)
# The guest init's parts: image/init/*.c, linked into build/aibox-init only.
INIT_SRC := $(sort $(wildcard image/init/*.c))
INIT_OBJ := $(INIT_SRC:%.c=$(G)/%.o)
HELPER_SRC := $(sort $(wildcard t/helper/test-*.c))
HELPERS := $(HELPER_SRC:t/helper/%.c=$(B)/%)
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz-*.c))
FUZZERS := $(FUZZ_SRC:fuzz/%.c=$(B)/fuzz/%)
MANS := $(sort $(wildcard docs/man/*.1))

all: $(B)/aibox $(TOOLS) $(IMAGE_PROGS) $(HELPERS)

# Rebuild everything when the flags change (git's GIT-CFLAGS).  The folder's
# -ffile-prefix-map is not among them: it maps the folder away, so a copy of
# the tree with its build (t/run's, for the user aibox-test) builds nothing again.
FLAGS_KEY = $(filter-out -ffile-prefix-map=%,$(ALL_CFLAGS)) $(ALL_LDFLAGS) $(GUEST_SAN_FLAGS)
$(B)/.flags: FORCE
	@mkdir -p $(B)
	@echo '$(FLAGS_KEY)' | cmp -s - $@ || echo '$(FLAGS_KEY)' > $@

# Only the guest's programs and the init's native test see the init's headers.
$(B)/image/%.o $(B)/t/helper/test-init-task.o: ALL_CFLAGS += -Iimage/init

$(B)/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(QCC)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/libaibox.a: $(LIB_OBJ)
	$(QAR)rm -f $@ && ar rcs $@ $^

# The guest's objects under SANITIZE=1: the host's flags with GUEST_SAN_FLAGS
# for SAN_FLAGS (the shorter stem wins over $(B)/%.o's rule).
GUEST_CFLAGS = $(filter-out $(SAN_FLAGS),$(ALL_CFLAGS)) $(GUEST_SAN_FLAGS)
GUEST_LDFLAGS = $(filter-out $(SAN_FLAGS),$(ALL_LDFLAGS)) $(GUEST_SAN_FLAGS)
ifeq ($(SANITIZE),1)
$(G)/image/%.o: ALL_CFLAGS += -Iimage/init
$(G)/%.o: %.c $(B)/.flags
	@mkdir -p $(dir $@)
	$(QCC)$(CC) $(GUEST_CFLAGS) -MMD -MP -c -o $@ $<
endif

# The library's parts the guest's programs link, in LIB_SRC's order: only
# these are built again for the guest.  A part the init comes to need fails
# its link, in every build, until it is listed here.
GUEST_LIB_SRC := $(addprefix common/,base/buf.c base/clock.c base/err.c base/guest_abi.c \
	base/guest_env.c base/guest_secrets.c base/hex.c base/json_get.c base/num.c base/printable.c \
	base/rmtree.c base/secret.c base/session_file.c base/spawn.c base/strvec.c \
	base/taskid.c base/ustar.c base/utf8.c git/gitproto.c net/git_remote.c \
	net/host_port.c task/task_settings.c task/transcript.c)
$(G)/libaibox-guest.a: $(GUEST_LIB_SRC:%.c=$(G)/%.o)
	$(QAR)rm -f $@ && ar rcs $@ $^

$(B)/aibox: $(B)/bin/aibox.o $(B)/libaibox.a
	$(QLD)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(B)/aibox-%: $(B)/tools/aibox-%.o $(B)/libaibox.a
	$(QLD)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(IMAGE_PROGS): $(B)/%: $(G)/image/%.o $(G)/libaibox-guest.a
	$(QLD)$(CC) $(GUEST_LDFLAGS) -o $@ $(filter-out %.a,$^) $(G)/libaibox-guest.a $(LIBS)

$(B)/aibox-init: $(INIT_OBJ)

$(B)/test-%: $(B)/t/helper/test-%.o $(B)/libaibox.a
	$(QLD)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# The native test of aibox-init's task mode links those parts of the init.
INIT_TASK_OBJ := $(addprefix $(B)/image/init/,task.o progress.o env.o git.o gitconfig.o clone.o \
	claude.o stream.o commit.o results_send.o resume.o step.o tar_out.o prepared.o sha1.o \
	guest_ca.o check.o early_clone.o early_task.o)
$(B)/test-init-task: $(B)/t/helper/test-init-task.o $(INIT_TASK_OBJ) $(B)/libaibox.a
	$(QLD)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

FUZZ_CC = clang
FUZZ_CFLAGS = -std=gnu11 -D_GNU_SOURCE -DAIBOX_VERSION='"$(VERSION)"' -Icommon -g -O1 \
	-fsanitize=fuzzer-no-link,address,undefined $(PKG_CFLAGS)
# The library is compiled once for libFuzzer (build/fuzz/libaibox-fuzz.a);
# each fuzzer is its one file linked with it.
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(B)/fuzz/lib/%.o)
$(B)/fuzz/lib/%.o: %.c
	@mkdir -p $(dir $@)
	$(QCC)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<
$(B)/fuzz/libaibox-fuzz.a: $(FUZZ_LIB_OBJ)
	$(QAR)rm -f $@ && ar rcs $@ $^
$(B)/fuzz/%: fuzz/%.c $(B)/fuzz/libaibox-fuzz.a
	@mkdir -p $(dir $@)
	$(QLD)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(B)/fuzz/libaibox-fuzz.a $(LIBS)

fuzz: $(FUZZERS)

FUZZ_SECONDS ?= 60
# Every fuzzer runs, with its seed corpus fuzz/corpus/NAME when there is one
# (new inputs go to build/fuzz/corpus-NAME); the target fails at the end if
# any fuzzer failed, naming them.
fuzz-run: fuzz
	$(Q)failed=; for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p $(B)/fuzz/corpus-$$n; \
		seeds=fuzz/corpus/$$n; [ -d $$seeds ] || { echo "$$n: no seed corpus $$seeds"; seeds=; }; \
		$$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=0 \
		-artifact_prefix=$(B)/fuzz/$$n- $(B)/fuzz/corpus-$$n $$seeds || failed="$$failed $$n"; \
	done; [ -z "$$failed" ] || { echo "fuzz-run: failed:$$failed" >&2; exit 1; }

check: all
	$(Q)t/run

# The task suite: every test file that runs aibox task on the real image, found
# as the files that load t/lib-vm.bash or t/lib-task.bash and run aibox task.
TASK_SUITE = $(shell grep -l -e '^load lib-vm' -e '^load lib-task' t/*.bats | \
	xargs grep -l 'aibox task')

check-cold: all
	$(Q)AIBOX_SNAPSHOT=0 t/run $(TASK_SUITE)

demo: all
	$(Q)t/demo

# What needs root runs as is for root (a container, a fresh cloud machine, CI,
# where there may be no sudo) and through sudo for anyone else, so the
# README's commands work for both.  AS_ROOT is evaluated where it is used.
AS_ROOT = $(if $(filter 0,$(shell id -u)),,sudo)
# need_sudo TARGET: stop, saying what to do, when sudo is needed but missing.
need_sudo = if [ "$$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then \
	echo "make $(1): this needs root and there is no sudo: run 'make $(1)' as root" >&2; \
	exit 2; fi

# npm (for the pinned Claude Code in the image and the tests) comes from Debian
# unless the machine already has one (NodeSource's nodejs conflicts with Debian's npm).
deps:
	$(Q)$(call need_sudo,deps)
	$(Q)$(AS_ROOT) apt-get update -qq
	$(Q)grep -v '^#' packages.txt | xargs -r $(AS_ROOT) sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$$@"' deps
	$(Q)command -v npm >/dev/null || $(AS_ROOT) sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm'

# zsh's fpath on Debian has /usr/share/zsh/vendor-completions for packages and
# /usr/local/share/zsh/site-functions for the rest.
ZSH_COMPLETIONS = $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)

# sudo only when the nearest existing folder of DESTDIR/PREFIX is not ours to write.
INSTALL_AS = $(shell d='$(DESTDIR)$(PREFIX)'; while [ ! -e "$$d" ]; do d=$$(dirname "$$d"); done; \
	[ -w "$$d" ] || echo sudo)
install: all
	$(Q)$(if $(INSTALL_AS),$(call need_sudo,install))
	$(INSTALL_AS) install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/aibox \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/aibox
	$(INSTALL_AS) install -m 755 $(B)/aibox $(DESTDIR)$(PREFIX)/bin/aibox
	$(INSTALL_AS) install -m 755 $(TOOLS) $(IMAGE_PROGS) $(DESTDIR)$(PREFIX)/libexec/aibox/
	$(if $(MANS),$(INSTALL_AS) install -m 644 $(MANS) $(DESTDIR)$(PREFIX)/share/man/man1/)
	$(INSTALL_AS) cp -R share/. $(DESTDIR)$(PREFIX)/share/aibox/
	$(INSTALL_AS) install -D -m 644 share/completion/aibox.bash \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/aibox
	$(INSTALL_AS) install -D -m 644 share/completion/_aibox $(DESTDIR)$(ZSH_COMPLETIONS)/_aibox
	$(if $(wildcard image/*),$(INSTALL_AS) cp -R image $(DESTDIR)$(PREFIX)/share/aibox/)
	$(INSTALL_AS) rm -rf $(DESTDIR)$(PREFIX)/share/aibox/image/*.c $(DESTDIR)$(PREFIX)/share/aibox/image/init

# The Debian package: `make install PREFIX=/usr` into a staging root, man pages
# gzipped as Debian wants them, Depends from dpkg-shlibdeps (the libraries the
# programs link) and DEB_RUNTIME (the programs aibox and the image build run).
DEB_MAINTAINER ?= aibox maintainers <aibox@localhost>
DEB_ARCH = $(shell dpkg --print-architecture)
DEB = $(B)/aibox_$(VERSION)_$(DEB_ARCH).deb
DEB_ROOT = $(B)/deb/debian/aibox
DEB_RUNTIME = git, qemu-system-x86, mmdebstrap, uidmap, busybox-static, \
	cpio, e2fsprogs, util-linux (>= 2.38), apt, npm | nodejs
deb: all
	$(Q)command -v dpkg-shlibdeps >/dev/null || { echo "make deb: no dpkg-shlibdeps (make deps installs dpkg-dev)" >&2; exit 2; }
	$(Q)rm -rf $(B)/deb $(DEB)
	$(Q)$(MAKE) -s --no-print-directory install DESTDIR=$(abspath $(DEB_ROOT)) PREFIX=/usr
	$(Q)gzip -9n $(DEB_ROOT)/usr/share/man/man1/*.1
	$(Q)install -d $(DEB_ROOT)/usr/share/doc/aibox $(DEB_ROOT)/DEBIAN
	$(Q)install -m 644 LICENSE $(DEB_ROOT)/usr/share/doc/aibox/copyright
	$(Q)mkdir -p $(B)/deb/debian && : >$(B)/deb/debian/control
	$(Q)cd $(B)/deb && dpkg-shlibdeps -O $$(find debian/aibox/usr/bin debian/aibox/usr/libexec -type f) \
		>shlibs.txt
	$(Q){ echo 'Package: aibox'; echo 'Version: $(VERSION)'; echo 'Architecture: $(DEB_ARCH)'; \
	  echo 'Maintainer: $(DEB_MAINTAINER)'; \
	  echo "Installed-Size: $$(du -sk --exclude=DEBIAN $(DEB_ROOT) | cut -f1)"; \
	  echo "Depends: $$(sed -n 's/^shlibs:Depends=//p' $(B)/deb/shlibs.txt), $(DEB_RUNTIME)"; \
	  echo 'Recommends: man-db, bash-completion'; \
	  echo 'Section: devel'; echo 'Priority: optional'; \
	  echo 'Description: run Claude Code unattended in a throwaway virtual machine'; \
	  echo ' aibox bundles one commit of a git repository, boots a fresh QEMU VM on it,'; \
	  echo ' lets Claude Code work and commit there and hands back a checked git bundle.'; \
	} >$(DEB_ROOT)/DEBIAN/control
	$(Q)dpkg-deb --root-owner-group -Zgzip --build $(DEB_ROOT) $(DEB) >/dev/null
	@echo '   DEB  ' $(DEB)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	$(Q)t/check-format

clean:
	rm -rf $(B)

FORCE:
.PHONY: all check check-cold demo deps install deb fuzz fuzz-run format format-check clean FORCE
.DELETE_ON_ERROR:

-include $(shell find $(B) -name '*.d' 2>/dev/null)
