# remat - build, test, demo.
#
#   make          build bin/remat-train (installs missing Debian packages first)
#   make test     build, then run every test (one Check runner, one closing line)
#   make asan     the same tests under AddressSanitizer + UBSan, in build-asan/
#   make demo     train a small byte-level model, switching checkpointing mid-run
#
# CPU-only: the CUDA backend is a later piece of work.

CC      ?= gcc
BUILD   ?= build
OPT     ?= -O3 -march=x86-64-v2 -mtune=native
# BLAS: OpenBLAS's OpenMP build, so its threads and ours share one pool. Linked by path so
# that the libblas alternative (possibly the pthread build) is never picked up by accident.
BLAS_DIR  = /usr/lib/x86_64-linux-gnu/openblas-openmp
BLAS_INC  = /usr/include/x86_64-linux-gnu/openblas-openmp
BLAS_LIBS = -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -fopenmp \
	-I. -Iengine -Ikernels -I$(BLAS_INC)
CFLAGS  ?= $(OPT)
ALL_CFLAGS = $(CFLAGS_BASE) $(CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  = $(BLAS_LIBS) -ljansson -lm -fopenmp $(EXTRA_LDFLAGS)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lpthread)

ENGINE_SRC = $(wildcard engine/eng_*.c)
KERNEL_SRC = $(wildcard kernels/cpu/kn_*.c)
LIB_SRC    = $(ENGINE_SRC) $(KERNEL_SRC)
LIB_OBJ    = $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC   = $(wildcard tests/unit/*.c)
TEST_OBJ   = $(TEST_SRC:%.c=$(BUILD)/%.o)

TRAIN   = $(BUILD)/bin/remat-train
TESTS   = $(BUILD)/bin/remat-tests

.PHONY: all deps binaries test asan demo bench clean format
all: deps
	@$(MAKE) --no-print-directory binaries

deps:
	@sh scripts/deps.sh

binaries: $(TRAIN) $(TESTS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libremat.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(TRAIN): $(BUILD)/engine/main/remat_train.o $(BUILD)/libremat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(TESTS): $(TEST_OBJ) $(BUILD)/libremat.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS) $(CHECK_LIBS)

# The tests find the binary under test and the data through the environment.
TEST_ENV = REMAT_TRAIN=$(abspath $(TRAIN)) REMAT_TESTDATA=$(abspath tests/data) \
	REMAT_TMP=$(abspath $(BUILD)/tmp)

test: all
	@rm -rf $(BUILD)/tmp && mkdir -p $(BUILD)/tmp
	$(TEST_ENV) $(TESTS)

asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer" \
		EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
		EXTRA_LDFLAGS="-fsanitize=address,undefined" test

demo: all
	@sh scripts/demo.sh $(TRAIN)

clean:
	rm -rf build build-asan

format:
	clang-format -i $(LIB_SRC) $(wildcard engine/*.h kernels/*.h engine/main/*.c) $(TEST_SRC)

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/engine/main/remat_train.d
