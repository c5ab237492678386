# remat - build, test, demo.
#
#   make          build bin/remat-train (installs missing Debian packages first)
#   make test     build, then run every test (one Check runner, one closing line)
#   make asan     the same tests under AddressSanitizer + UBSan, in build-asan/
#   make demo     train a small byte-level model, switching checkpointing mid-run
#   make fuzz     the protocol fuzz target for longer than make test runs it
#   make install  programs, man pages, systemd units, completion (PREFIX, DESTDIR; uninstall)
#
# The CUDA backend is built when nvcc is found (CUDA=0: CPU only; CUDA=1: required); see
# the CUDA section below. tests/cuda/run-on-gpu.sh builds and checks it on a GPU.

CC      ?= gcc
BUILD   ?= build
OPT     ?= -O3 -march=x86-64-v2 -mtune=native
# BLAS: OpenBLAS's OpenMP build, so its threads and ours share one pool. Linked by path so
# that the libblas alternative (possibly the pthread build) is never picked up by accident.
BLAS_DIR  = /usr/lib/x86_64-linux-gnu/openblas-openmp
BLAS_INC  = /usr/include/x86_64-linux-gnu/openblas-openmp
BLAS_LIBS = -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas

# -fno-trapping-math: no code here reads floating-point exception flags, and without it
# GCC keeps a branch (a clamp, a max) from vectorising; results are the same bits.
# -fno-math-errno: no code here reads errno after a math function, and without it sqrtf
# is a call per element (AdamW ran at a third of the memory's speed); sqrtps rounds as
# sqrtf does, so the same bits again.
# The floors, bottom up (docs/architecture.md): base/, engine/core, engine/model (and its
# cuda/ and dp/), engine/io, engine/run; every header is named by its file name alone.
ENGINE_INC = -Ibase -Iengine/core -Iengine/model -Iengine/model/cuda -Iengine/model/dp \
	-Iengine/io -Iengine/run
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -fopenmp -fno-trapping-math \
	-fno-math-errno -I. $(ENGINE_INC) -Ikernels -Iproto -Iserve -Iworker \
	-I$(BLAS_INC)
CFLAGS  ?= $(OPT)
ALL_CFLAGS = $(CFLAGS_BASE) $(CFLAGS) $(EXTRA_CFLAGS)
# libcrypto: the checkpoints' SHA-256 (engine/io/eng_sha256.c); the worker's and the tests'
# PCRE2 and utf8proc: the tokenizer's regexes and Unicode normalization (engine/io/eng_tok*)
LDLIBS  = $(BLAS_LIBS) -luv -ljansson -lcrypto -lpcre2-8 -lutf8proc -lm -lpthread -fopenmp \
	$(EXTRA_LDFLAGS)
# rematd and rematctl compute nothing: libuv, jansson, libc (tests/link.sh checks it)
CORE_LDLIBS = -luv -ljansson -lm -lpthread $(EXTRA_LDFLAGS)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lpthread)

# ---- CUDA backend (kernels/cuda/, engine/model/cuda/) ----
# Built when nvcc is found in /usr/local/cuda/bin or on PATH; CUDA=0 builds CPU-only (then
# engine/model/cuda/eng_nocuda.c answers "this build has no CUDA backend"), CUDA=1 fails without nvcc.
# Device code for sm_80 and sm_90, plus PTX that later GPUs compile at load. The CUDA runtime
# is linked statically, cuDNN dynamically (rpath to the toolkit) and --as-needed, so a
# program that does not call it (rematctl, rematd) never loads it; cuBLASLt is dlopen'd.
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
ifeq ($(CUDA),0)
HAVE_CUDA :=
else ifneq ($(NVCC),)
HAVE_CUDA := 1
else ifeq ($(CUDA),1)
$(error CUDA=1 but nvcc is neither in /usr/local/cuda/bin nor on PATH)
endif
ifdef HAVE_CUDA
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH   = -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
NVCC_FLAGS ?= -O3
CUDA_LIBDIR = $(CUDA_HOME)/lib64
ALL_NVCC_FLAGS = -std=c++17 $(NVCC_FLAGS) $(CUDA_ARCH) -I. $(ENGINE_INC) -Ikernels \
	-Ikernels/cuda \
	-DKC_CUDA_LIBDIR='"$(CUDA_LIBDIR)"' -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings
CFLAGS_BASE += -DREMAT_CUDA -I$(CUDA_HOME)/include -Ikernels/cuda
# cuBLASLt is not linked but opened when a GPU model starts (kernels/cuda/kc_blas.cu: linked,
# it costs every program start 3 s and 200 MB); cuDNN's small front library is linked.
LDLIBS     += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart_static \
	-Wl,--push-state,--as-needed -lcudnn -lstdc++ -ldl -lrt -Wl,--pop-state
CUDA_SRC    = $(wildcard kernels/cuda/kc_*.cu)
endif
CUDA_OBJ    = $(CUDA_SRC:%.cu=$(BUILD)/%.o)

# ---- the CUDA backend on the CPU (tests/cuda/emu/, run by tests/cuda/emu/run-on-cpu.sh) ----
# CUDA_EMU=DIR, DIR a checkout of ROCm/HIP-CPU: the same backend built for this CPU. The
# files with kernels go through HIP-CPU (their launches rewritten, kc_emu.h in place of the
# CUDA headers); the host-side .cu files are compiled as they are by the C++ compiler; the
# CUDA runtime is emu_rt.c (HIP-CPU's blocks run on TBB) and cuBLASLt emu_lt.cpp, built as
# the library kc_blas.cu opens. cuDNN stays NVIDIA's, which finds no driver and says so.
ifdef CUDA_EMU
.DEFAULT_GOAL := all
ifndef HAVE_CUDA
$(error CUDA_EMU needs the CUDA toolkit's headers: nvcc was not found)
endif
EMU_DIR      = tests/cuda/emu
EMU_KERNELS  = $(shell grep -l __global__ $(CUDA_SRC))
EMU_CXXFLAGS = -std=c++17 -O2 -g -ffp-contract=off -Wall -Wextra -Werror -fPIC
CUDA_OBJ    += $(BUILD)/$(EMU_DIR)/emu_rt.o
LDLIBS      := $(subst -lcudart_static,-ltbb,$(LDLIBS))
CUBLAS_MAJOR = $(shell sed -n 's/^\#define CUBLAS_VER_MAJOR \([0-9]*\).*/\1/p' \
	$(CUDA_HOME)/include/cublas_api.h)
EMU_LT       = $(BUILD)/emu/libcublasLt.so.$(CUBLAS_MAJOR)

$(EMU_KERNELS:%.cu=$(BUILD)/%.o): $(BUILD)/%.o: %.cu $(EMU_DIR)/kc_emu.h
	@mkdir -p $(dir $@)
	perl -0777 -pe 's/(\w+(?:<\w+>)?)<<<(.*?)>>>/KC_EMU_LAUNCH($$1, $$2)/gs' $< > $(@:.o=.emu.cpp)
	$(CXX) $(EMU_CXXFLAGS) -I$(EMU_DIR)/include -isystem $(CUDA_EMU)/include -I. -Ikernels \
		-Ikernels/cuda -MMD -MP -MT $@ -c $(@:.o=.emu.cpp) -o $@

$(patsubst %.cu,$(BUILD)/%.o,$(filter-out $(EMU_KERNELS),$(CUDA_SRC))): $(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -x c++ -I$(CUDA_HOME)/include -I. $(ENGINE_INC) -Ikernels \
		-Ikernels/cuda -DKC_CUDA_LIBDIR='"$(CUDA_LIBDIR)"' -MMD -MP -c $< -o $@

$(EMU_LT): $(EMU_DIR)/emu_lt.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -shared -I$(CUDA_HOME)/include -I$(BLAS_INC) -o $@ $< $(BLAS_LIBS)

binaries: $(EMU_LT)
endif

# ---- MPI (engine/model/dp/) ----
# Data parallelism over Open MPI when its headers are there (scripts/deps.sh installs
# libopenmpi-dev); MPI=0 builds without (engine/model/dp/eng_nodp.c: one process). Only the worker
# and the tests link libmpi; rematd and rematctl never do.
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null)
endif
ifneq ($(MPI_LIBS),)
HAVE_MPI := 1
LDLIBS   += $(MPI_LIBS)
endif
$(BUILD)/engine/model/dp/eng_dp.o: ALL_CFLAGS += $(MPI_CFLAGS)

# ---- oneDNN (kernels/cpu/kn_dnnl.c) ----
# The CPU's bf16 matmuls ("precision": "bf16") through oneDNN when its header is there
# (scripts/deps.sh installs libdnnl-dev); DNNL=0 builds without (bf16 jobs are then refused,
# saying why). Only the worker and the tests link libdnnl; rematd and rematctl never do.
ifneq ($(DNNL),0)
HAVE_DNNL := $(wildcard /usr/include/oneapi/dnnl/dnnl.h)
endif
ifneq ($(HAVE_DNNL),)
LDLIBS += -ldnnl
$(BUILD)/kernels/cpu/kn_dnnl.o: ALL_CFLAGS += -DREMAT_DNNL -I/usr/include/oneapi/dnnl
endif

# Two libraries, each a set of folders. libremat-core.a: the protocol (proto/), the control
# servers' connection layer (serve/), errors, credentials and safe file access (base/), the
# job spec, the policy and the planner (engine/core/): what rematd and rematctl link, no
# maths in it. libremat.a: the rest of the engine (engine/model/, io/, run/) and the
# kernels, for the worker.
PROTO_SRC  = $(wildcard proto/proto_*.c)
CORE_SRC   = $(PROTO_SRC) $(wildcard serve/sv_*.c base/eng_*.c engine/core/eng_*.c)
ENGINE_SRC = $(filter-out $(if $(HAVE_CUDA),engine/model/cuda/eng_nocuda.c,engine/model/cuda/eng_cuda%.c) \
	$(if $(HAVE_MPI),engine/model/dp/eng_nodp.c,engine/model/dp/eng_dp.c), \
	$(wildcard engine/model/eng_*.c engine/model/*/eng_*.c engine/io/eng_*.c engine/run/eng_*.c))
KERNEL_SRC = $(wildcard kernels/cpu/kn_*.c)
LIB_SRC    = $(CORE_SRC) $(ENGINE_SRC) $(KERNEL_SRC)
CORE_OBJ   = $(CORE_SRC:%.c=$(BUILD)/%.o)
LIB_OBJ    = $(ENGINE_SRC:%.c=$(BUILD)/%.o) $(KERNEL_SRC:%.c=$(BUILD)/%.o) $(CUDA_OBJ)
CORE_LIB   = $(BUILD)/libremat-core.a
ENGINE_LIB = $(BUILD)/libremat.a $(CORE_LIB)
TRAIN_SRC  = $(wildcard worker/*.c)
TRAIN_OBJ  = $(TRAIN_SRC:%.c=$(BUILD)/%.o)
DAEMON_SRC = $(wildcard daemon/*.c)
DAEMON_OBJ = $(DAEMON_SRC:%.c=$(BUILD)/%.o)
CLIENT_SRC = $(wildcard client/*.c)
CLIENT_OBJ = $(CLIENT_SRC:%.c=$(BUILD)/%.o)
# tests/cuda/test_cuda.c and test_cuda_dp.c only need eng_cuda.h (they skip without the
# backend); the rest of tests/cuda/ needs the toolkit
CUDA_TEST_ANY = tests/cuda/test_cuda.c tests/cuda/test_cuda_dp.c
TEST_SRC   = $(wildcard tests/unit/*.c tests/e2e/*.c tests/reference/*.c tests/security/*.c) \
	$(CUDA_TEST_ANY) $(if $(HAVE_CUDA),$(filter-out $(CUDA_TEST_ANY) \
	tests/cuda/bench_%,$(wildcard tests/cuda/*.c tests/cuda/*.cu)))
TEST_OBJ   = $(patsubst %.cu,$(BUILD)/%.o,$(TEST_SRC:%.c=$(BUILD)/%.o))
$(TEST_OBJ): ALL_CFLAGS += -Itests/unit -Itests/e2e -Iclient

TRAIN   = $(BUILD)/bin/remat-train
DAEMON  = $(BUILD)/bin/rematd
CLIENT  = $(BUILD)/bin/rematctl
TESTS   = $(BUILD)/bin/remat-tests
FUZZ    = $(BUILD)/bin/fuzz-proto
FUZZ_ST = $(BUILD)/bin/fuzz-st
FUZZ_TOK = $(BUILD)/bin/fuzz-tok
FUZZ_RUNS ?= 20000

.PHONY: all deps binaries test asan demo bench bench-blas bench-torch bench-timing fuzz clean format \
	FORCE
all: deps
	@$(MAKE) --no-print-directory binaries

deps:
	@sh scripts/deps.sh

binaries: $(TRAIN) $(TESTS) $(DAEMON) $(CLIENT) $(if $(HAVE_CUDA),$(BUILD)/bin/bench-gpu)

# Every object is built again when the flags change (a new -f... would otherwise reach
# only the files edited since): $(BUILD)/cflags holds the last ones, rewritten on a change
FLAGS_NOW = $(CC) $(ALL_CFLAGS)
$(BUILD)/cflags: FORCE
	@mkdir -p $(dir $@)
	@[ "$$(cat $@ 2>/dev/null)" = '$(FLAGS_NOW)' ] || echo '$(FLAGS_NOW)' > $@
FORCE:

$(BUILD)/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(ALL_NVCC_FLAGS) -MMD -MP -c $< -o $@

# The GPU benchmark of tests/cuda/run-on-gpu.sh: tokens/s, ms per step, peak device memory
# per policy (gpt2-small shape by default).
$(BUILD)/bin/bench-gpu: tests/cuda/bench_gpu.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libremat.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(CORE_LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(TRAIN): $(TRAIN_OBJ) $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# rematd and rematctl: no -fopenmp, no BLAS, no CUDA at the link (tests/link.sh)
CORE_LINK_FLAGS = $(filter-out -fopenmp,$(ALL_CFLAGS))

$(DAEMON): $(DAEMON_OBJ) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_LINK_FLAGS) -o $@ $^ $(CORE_LDLIBS)

# rematctl plot draws its images with Cairo: only rematctl links it (tests/link.sh)
CAIRO_CFLAGS := $(shell pkg-config --cflags cairo 2>/dev/null)
CAIRO_LIBS   := $(or $(shell pkg-config --libs cairo 2>/dev/null),-lcairo)
$(BUILD)/client/cli_plot_img.o: ALL_CFLAGS += $(CAIRO_CFLAGS)

$(CLIENT): $(CLIENT_OBJ) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_LINK_FLAGS) -o $@ $^ $(CORE_LDLIBS) $(CAIRO_LIBS)

# The safetensors parser on bytes from memory: the file format is outside input too.
$(FUZZ_ST): tests/fuzz/fuzz_st.c engine/io/eng_st.c engine/io/eng_st_write.c base/eng_fs.c \
	base/eng_err.c proto/proto_units.c
	@mkdir -p $(dir $@)
	clang -g -O1 -std=c11 -D_GNU_SOURCE $(ENGINE_INC) -Ikernels -Iproto -fsanitize=fuzzer,address,undefined \
		-o $@ $^ -ljansson -lm

# The tokenizer's reader and encoder on a tokenizer.json's bytes from memory.
$(FUZZ_TOK): tests/fuzz/fuzz_tok.c $(wildcard engine/io/eng_tok_*.c) base/eng_fs.c \
	base/eng_err.c proto/proto_units.c
	@mkdir -p $(dir $@)
	clang -g -O1 -std=c11 -D_GNU_SOURCE $(ENGINE_INC) -Iproto -fsanitize=fuzzer,address,undefined \
		-o $@ $^ -ljansson -lpcre2-8 -lutf8proc -lm

# libFuzzer needs clang; the target links proto/ alone (no I/O there).
$(FUZZ): tests/fuzz/fuzz_proto.c $(PROTO_SRC)
	@mkdir -p $(dir $@)
	clang -g -O1 -std=c11 -D_GNU_SOURCE -Iproto -fsanitize=fuzzer,address,undefined \
		-o $@ $^ -ljansson -lm

# The client's pure helpers (formatting, argument parsing, plots) are unit-tested too.
CLIENT_TESTED = $(BUILD)/client/cli_fmt.o $(BUILD)/client/cli_plot.o \
	$(BUILD)/client/cli_plot_img.o
# So is the daemon's sd_notify protocol (no libuv, no logging in it).
DAEMON_TESTED = $(BUILD)/daemon/srv_notify.o

# the plots' tests read the PNG back with zlib and the SVG with expat
$(TESTS): $(TEST_OBJ) $(CLIENT_TESTED) $(DAEMON_TESTED) $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS) $(CHECK_LIBS) $(CAIRO_LIBS) -lz -lexpat

# The tests find the binary under test and the data through the environment.
TEST_ENV = REMAT_TRAIN=$(abspath $(TRAIN)) REMAT_TESTDATA=$(abspath tests/data) \
	REMAT_TMP=$(abspath $(BUILD)/tmp) REMATD=$(abspath $(DAEMON)) \
	REMATCTL=$(abspath $(CLIENT)) REMAT_BIN=$(abspath $(BUILD)/bin) \
	REMAT_TOK_NPM=$(abspath $(BUILD)/npm)

test: all
	@rm -rf $(BUILD)/tmp && mkdir -p $(BUILD)/tmp
	@if [ -f tests/fuzz/fuzz_proto.c ]; then \
		$(MAKE) --no-print-directory $(FUZZ) && \
		mkdir -p $(BUILD)/tmp/corpus && \
		$(FUZZ) -runs=$(FUZZ_RUNS) -seed=1 -max_len=4096 -artifact_prefix=$(BUILD)/tmp/ $(BUILD)/tmp/corpus tests/fuzz/corpus \
			2>$(BUILD)/tmp/fuzz.log && echo "fuzz-proto: $(FUZZ_RUNS) runs, no crash" || \
			{ tail -40 $(BUILD)/tmp/fuzz.log; exit 1; }; fi
	@if [ -f tests/fuzz/fuzz_st.c ]; then \
		$(MAKE) --no-print-directory $(FUZZ_ST) && \
		mkdir -p $(BUILD)/tmp/corpus-st && \
		$(FUZZ_ST) -runs=$(FUZZ_RUNS) -seed=1 -max_len=8192 -artifact_prefix=$(BUILD)/tmp/ $(BUILD)/tmp/corpus-st \
			tests/fuzz/corpus-st 2>$(BUILD)/tmp/fuzz-st.log && \
			echo "fuzz-st: $(FUZZ_RUNS) runs, no crash" || \
			{ tail -40 $(BUILD)/tmp/fuzz-st.log; exit 1; }; fi
	@if [ -f tests/fuzz/fuzz_tok.c ]; then \
		$(MAKE) --no-print-directory $(FUZZ_TOK) && \
		mkdir -p $(BUILD)/tmp/corpus-tok && \
		$(FUZZ_TOK) -runs=$(FUZZ_RUNS) -seed=1 -max_len=4096 -artifact_prefix=$(BUILD)/tmp/ \
			$(BUILD)/tmp/corpus-tok tests/fuzz/corpus-tok 2>$(BUILD)/tmp/fuzz-tok.log && \
			echo "fuzz-tok: $(FUZZ_RUNS) runs, no crash" || \
			{ tail -40 $(BUILD)/tmp/fuzz-tok.log; exit 1; }; fi
	@sh tests/systemd/verify.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/tmp/systemd)
	@sh tests/man.sh $(abspath $(BUILD)/bin) man $(abspath $(BUILD)/tmp/man)
	@sh tests/readme.sh $(abspath $(BUILD)/bin)
	@bash tests/completion.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/tmp/completion)
	@sh tests/install.sh "$(MAKE)" $(BUILD) $(abspath $(BUILD)/tmp/install)
	@sh tests/link.sh $(abspath $(BUILD)/bin)
	@sh tests/layout.sh
	@sh tests/layout.sh --planted
	@sh tests/design.sh
	@sh tests/design.sh --planted
	@sh tests/circles.sh $(BUILD)
	$(TEST_ENV) $(TESTS)

# The GPU's suites alone, each with its own closing line (tests/cuda/run-on-gpu.sh).
CUDA_SUITES ?= cuda $(if $(HAVE_CUDA),cuda-kernels sdpa) cuda-dp
.PHONY: test-cuda
test-cuda: binaries
	@rm -rf $(BUILD)/tmp && mkdir -p $(BUILD)/tmp
	@rc=0; for s in $(CUDA_SUITES); do \
		CK_RUN_SUITE=$$s $(TEST_ENV) $(TESTS) || rc=1; done; exit $$rc

fuzz: all $(FUZZ) $(FUZZ_ST) $(FUZZ_TOK)
	@mkdir -p $(BUILD)/corpus $(BUILD)/corpus-st $(BUILD)/corpus-tok
	$(FUZZ) -max_total_time=300 -max_len=65536 $(BUILD)/corpus tests/fuzz/corpus
	$(FUZZ_ST) -max_total_time=300 -max_len=65536 $(BUILD)/corpus-st tests/fuzz/corpus-st
	$(FUZZ_TOK) -max_total_time=300 -max_len=65536 $(BUILD)/corpus-tok tests/fuzz/corpus-tok

# fontconfig (under rematctl's plots, through Cairo) keeps what it loaded until FcFini:
# tests/lsan-cairo.supp names it, and nothing else
asan: deps
	@LSAN_OPTIONS=suppressions=$(abspath tests/lsan-cairo.supp) \
		$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer" \
		EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
		EXTRA_LDFLAGS="-fsanitize=address,undefined" test

demo: all
	@sh scripts/demo.sh $(BUILD)/bin

# make install / make uninstall: the three programs, the man pages, the systemd units (their
# @BINDIR@ filled in) and sysusers entry, the bash completion, an example job and the
# protocol reference. PREFIX, DESTDIR and every directory below can be set on the command
# line: `make install PREFIX=/usr DESTDIR=/tmp/pkg`. Build first (`make`), then install
# (as root for the system's directories); uninstall removes exactly what install writes.
PREFIX        ?= /usr/local
BINDIR        ?= $(PREFIX)/bin
DATADIR       ?= $(PREFIX)/share
MANDIR        ?= $(DATADIR)/man
DOCDIR        ?= $(DATADIR)/doc/remat
UNITDIR       ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR   ?= $(PREFIX)/lib/sysusers.d
COMPLETIONDIR ?= $(DATADIR)/bash-completion/completions
INSTALL       ?= install

MAN_PAGES = man/rematctl.1 man/remat-train.1 man/remat-job.5 man/rematd.8
UNITS     = $(wildcard systemd/*.service systemd/*.socket)
SYSUSERS  = $(wildcard systemd/remat.sysusers)
# Installed files, DESTDIR excluded: what uninstall removes.
INSTALLED = $(addprefix $(BINDIR)/,remat-train rematd rematctl) \
	$(foreach p,$(MAN_PAGES),$(MANDIR)/man$(subst .,,$(suffix $(p)))/$(notdir $(p))) \
	$(addprefix $(UNITDIR)/,$(notdir $(UNITS))) \
	$(if $(SYSUSERS),$(SYSUSERSDIR)/remat.conf) \
	$(COMPLETIONDIR)/rematctl $(DOCDIR)/examples/job.json $(DOCDIR)/protocol.md
# The man pages name the default locations; installed, they name the chosen ones.
MAN_SUBST = sed -e 's|/usr/local/share/doc/remat|$(DOCDIR)|g' \
	-e 's|/usr/local/lib/systemd/system|$(UNITDIR)|g' \
	-e 's|/usr/local/lib/sysusers.d|$(SYSUSERSDIR)|g' \
	-e 's|/usr/local/share/bash\\-completion/completions|$(COMPLETIONDIR)|g'
# Units: the placeholders of their settings (comment lines keep theirs, as documentation).
UNIT_SUBST = sed -e '/^[\#;]/!s|@BINDIR@|$(BINDIR)|g' -e '/^[\#;]/!s|@PREFIX@|$(PREFIX)|g' \
	-e '/^[\#;]/!s|@DATADIR@|$(DATADIR)|g' -e '/^[\#;]/!s|@DOCDIR@|$(DOCDIR)|g'

.PHONY: install uninstall
install: $(TRAIN) $(DAEMON) $(CLIENT)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(DOCDIR)/examples \
		$(if $(UNITS),$(DESTDIR)$(UNITDIR)) $(if $(SYSUSERS),$(DESTDIR)$(SYSUSERSDIR))
	$(INSTALL) -m 0755 $(TRAIN) $(DAEMON) $(CLIENT) $(DESTDIR)$(BINDIR)/
	@set -e; for p in $(MAN_PAGES); do \
		f=$(DESTDIR)$(MANDIR)/man$${p##*.}/$${p#man/}; \
		echo "$$p -> $$f"; $(MAN_SUBST) $$p > $$f; chmod 0644 $$f; done
	@set -e; for u in $(UNITS); do \
		f=$(DESTDIR)$(UNITDIR)/$${u#systemd/}; \
		echo "$$u -> $$f"; $(UNIT_SUBST) $$u > $$f; chmod 0644 $$f; \
		if grep -n '^[^#;]*@[A-Z][A-Z_]*@' $$f; then echo "$$f: placeholder left" >&2; exit 1; fi; \
		done
	$(if $(SYSUSERS),$(INSTALL) -m 0644 $(SYSUSERS) $(DESTDIR)$(SYSUSERSDIR)/remat.conf)
	$(INSTALL) -m 0644 completion/rematctl.bash $(DESTDIR)$(COMPLETIONDIR)/rematctl
	$(INSTALL) -m 0644 examples/job.json $(DESTDIR)$(DOCDIR)/examples/job.json
	$(INSTALL) -m 0644 docs/protocol.md $(DESTDIR)$(DOCDIR)/protocol.md

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null || true

clean:
	rm -rf build build-asan build-gpu

format:
	clang-format -i $(LIB_SRC) $(wildcard */*.h engine/*/*.h engine/*/*/*.h) $(TRAIN_SRC) $(DAEMON_SRC) $(CLIENT_SRC) \
		$(TEST_SRC)

-include $(CORE_OBJ:.o=.d) $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(TRAIN_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) \
	$(CLIENT_OBJ:.o=.d)

# Performance is measured here, never by timed tests (issue 5 grows this into the full
# table). Defaults: the gpt2-small shape at batch 4 x 256, 2 threads.
# OPENBLAS_CORETYPE is unset for the run (KEEP_CORETYPE=1 keeps it): the figures are those
# of the library and kernel a user with a clean environment gets.
BENCH_ENV = $(if $(KEEP_CORETYPE),,env -u OPENBLAS_CORETYPE)
bench: all $(BUILD)/bin/bench-latency $(BUILD)/bin/bench-sgemm $(BUILD)/bin/bench-sha256 \
	$(BUILD)/bin/bench-tok $(BUILD)/bin/bench-q4
	@mkdir -p $(BUILD)/bench
	@$(if $(KEEP_CORETYPE),,[ -z "$$OPENBLAS_CORETYPE" ] || echo "bench: OPENBLAS_CORETYPE=$$OPENBLAS_CORETYPE unset for the run (KEEP_CORETYPE=1 keeps it)")
	@$(BENCH_ENV) sh bench/steps.sh $(abspath $(BUILD)/bin) gpt2-small 4 256 3 $(abspath $(BUILD)/bench/gpt2-small.json)
	@$(BENCH_ENV) sh bench/steps.sh $(abspath $(BUILD)/bin) mini 4 256 3 $(abspath $(BUILD)/bench/mini.json)
	@$(BENCH_ENV) sh bench/steps.sh $(abspath $(BUILD)/bin) smollm-135m 4 256 3 $(abspath $(BUILD)/bench/smollm-135m.json)
	@$(BENCH_ENV) sh bench/timing.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/bench/timing.json)
	@$(BENCH_ENV) sh bench/untracked.sh $(abspath $(BUILD)/bin) 4 256 $(abspath $(BUILD)/bench/untracked.json) tiny mini gpt2-small
	@$(BENCH_ENV) sh bench/auto.sh $(abspath $(BUILD)/bin) gpt2-small 4 256 $(abspath $(BUILD)/bench/auto-gpt2-small.json)
	@$(BENCH_ENV) sh bench/auto.sh $(abspath $(BUILD)/bin) mini 4 256 $(abspath $(BUILD)/bench/auto-mini.json)
	@$(BENCH_ENV) sh bench/latency.sh $(abspath $(BUILD)/bin)
	@$(BENCH_ENV) sh bench/ckpt.sh $(abspath $(TRAIN))
	@$(BUILD)/bin/bench-sha256 400 $(abspath $(BUILD)/bench/sha256.bin) > $(BUILD)/bench/sha256.txt && \
		cat $(BUILD)/bench/sha256.txt && tail -1 $(BUILD)/bench/sha256.txt > $(BUILD)/bench/sha256.json
	@$(BENCH_ENV) sh bench/loop.sh $(abspath $(BUILD)/bin) mini 12 $(abspath $(BUILD)/bench/loop-mini.json)
	@$(BENCH_ENV) sh bench/mpi.sh $(abspath $(BUILD)/bin) mini 8 $(abspath $(BUILD)/bench/mpi-mini.json)
	@$(BENCH_ENV) sh bench/bf16.sh $(abspath $(BUILD)/bin) mini 4 64 300 $(abspath $(BUILD)/bench/bf16-mini.json)
	@sh bench/tok.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/npm) $(abspath $(BUILD)/bench/tok.json)
	@$(BENCH_ENV) sh bench/data.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/bench/data.json)
	@$(BENCH_ENV) sh bench/pool.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/bench/pool.json)
	@$(BENCH_ENV) $(BUILD)/bin/bench-q4 1024 1 | tee $(BUILD)/bench/q4.txt && \
		tail -1 $(BUILD)/bench/q4.txt > $(BUILD)/bench/q4.json
	@$(BENCH_ENV) sh bench/qlora.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/bench/qlora.json)
	@echo "JSON: $(abspath $(BUILD)/bench)/*.json"

# Where a step's time goes, each class of work against its limit (bench/timing.sh; also
# part of `make bench`)
bench-timing: all
	@mkdir -p $(BUILD)/bench
	@$(BENCH_ENV) sh bench/timing.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD)/bench/timing.json)

# The matmul libraries compared on the model's products (INSTALL=1 installs BLIS and oneDNN)
bench-blas: all $(BUILD)/bin/bench-sgemm
	@sh bench/blas.sh $(abspath $(BUILD)/bin) gpt2-small 4 256 $(if $(INSTALL),--install)

# remat against a tuned PyTorch (its best OpenBLAS kernel, passive OpenMP, jemalloc; fp32
# and bf16 autocast), interleaved, on gpt2-small and a head-heavy shape; ROUNDS rounds
# (default 3), the table's JSON in $(BUILD)/bench/torch.json (INSTALL=1 lets it install
# Debian's python3-torch and libjemalloc2)
bench-torch: all $(BUILD)/bin/bench-sgemm
	@mkdir -p $(BUILD)/bench
	@$(BENCH_ENV) JSON_OUT=$(abspath $(BUILD)/bench/torch.json) sh bench/torch.sh \
		$(abspath $(BUILD)/bin) $(or $(ROUNDS),3) $(if $(INSTALL),--install)

$(BUILD)/bin/bench-sgemm: bench/sgemm.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/bench-q4: bench/q4.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# SHA-256 of checkpoints (libcrypto): MB/s from memory and from a file
$(BUILD)/bin/bench-sha256: bench/sha256.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# the tokenizer's encode, one thread (bench/tok.sh sets it beside Hugging Face's JavaScript)
$(BUILD)/bin/bench-tok: bench/tok.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/bench-latency: bench/latency.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)
