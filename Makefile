# tandem build. `make` builds build/tandem and build/libtandem.a.
#   make demo        install missing Debian packages (as root), build, run the bundled model
#   make test        every test: unit + conformance, then the ASan+UBSan build of the unit tests
#   make test-quick  unit + conformance tests, no sanitizer build
#   make fuzz        libFuzzer targets (clang) into build/fuzz/, see docs/fuzzing.md
# Switches: CUDA=1 adds the CUDA prefill engine (nvcc, cuBLAS; CUDA_HOME), O=0 for a debug build.

CC      ?= gcc
O       ?= 2
BUILD   ?= build
CFLAGS  ?= -O$(O) -g
WFLAGS  := -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter
CPPFLAGS := -D_GNU_SOURCE -Iinclude -Isrc -I/usr/include/cjson
LDLIBS  := -lcjson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -pthread

# Instruction-set variants: a file's suffix picks its flags (one shared kernel
# source, thin per-ISA units; the runtime picks one by CPUID). _emu.c units
# build the AMX kernels for AVX-512 with the tiles emulated (amx_emu.h); _gfni.c
# units are AVX-512 plus GFNI (its own CPUID bit).
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-bf16 -mamx-int8 -mprfchw
ISA_gfni   := $(ISA_avx512) -mgfni

# The build's identity: the router's calibrations are keyed by it (speeds belong to the kernels
# measured). The git revision, or "unknown" outside a checkout; the header changes only with it.
BUILD_ID := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
CPPFLAGS += -I$(BUILD)/gen

LIB_SRC := $(shell find src -name '*.c' ! -path 'src/cli/*' | sort)
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))

# The CUDA engine (src/engine/cuda: host C + .cu kernels) only with CUDA=1; without it the registry
# has no "cuda" entry. sm_90 machine code (the H200) plus compute_90 PTX for later GPUs.
CUDA      ?= 0
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CU_ARCH   ?= -gencode arch=compute_90,code=[sm_90,compute_90]
ifeq ($(CUDA),1)
CU_SRC   := $(sort $(wildcard src/engine/cuda/*.cu))
CPPFLAGS += -DTM_CUDA -I$(CUDA_HOME)/include
LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
else
LIB_SRC  := $(filter-out src/engine/cuda/%,$(LIB_SRC))
CU_SRC   :=
endif

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

isa = $(if $(findstring _emu.c,$1),$(ISA_avx512),$(if $(findstring _amx.c,$1),$(ISA_amx),$(if $(findstring _gfni.c,$1),$(ISA_gfni),$(if $(findstring _avx512.c,$1),$(ISA_avx512),$(if $(findstring _avx2.c,$1),$(ISA_avx2))))))

.PHONY: all test test-quick test-san demo fuzz clean deps FORCE kbench-ab cuda-check
all: $(BUILD)/tandem $(BUILD)/libtandem.a $(TESTS) $(BUILD)/kbench

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WFLAGS) $(CFLAGS) $(call isa,$<) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 -Iinclude -Isrc $(CU_ARCH) -Xcompiler -Wall,-Wextra -MMD -MP -c $< -o $@

$(BUILD)/gen/build_id.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define TANDEM_BUILD_ID "$(BUILD_ID)"' > $@.tmp; if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/src/core/tunecache.o: $(BUILD)/gen/build_id.h
FORCE:

$(BUILD)/libtandem.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tandem: $(CLI_OBJ) $(BUILD)/libtandem.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libtandem.a $(LDLIBS)

# kbench with a second build of the AMX GEMM linked in, for in-process A/B (kbench -a 1 -p R):
# make kbench-ab AMX_ALT="-DAMX_PG=8" (gemm_amx.c's build options; always rebuilt, and by
# `make test` with none, so it keeps compiling)
kbench-ab: $(BUILD)/libtandem.a
	$(CC) $(CPPFLAGS) $(WFLAGS) $(CFLAGS) $(ISA_amx) $(AMX_ALT) -Dtm_kvariant_amx=tm_kvariant_amx_alt \
	  -Dtm_kamx_config=tm_kamx_config_alt -c src/engine/cpu/gemm_amx.c -o $(BUILD)/gemm_amx_alt.o
	$(CC) $(CPPFLAGS) $(WFLAGS) $(CFLAGS) -o $(BUILD)/kbench-ab tools/kbench.c $(BUILD)/gemm_amx_alt.o \
	  $(BUILD)/libtandem.a $(LDLIBS)

# the kernel harness (docs/kernels.md "kbench"), built with everything so it keeps compiling
$(BUILD)/kbench: tools/kbench.c $(BUILD)/libtandem.a
	$(CC) $(CPPFLAGS) $(WFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libtandem.a $(LDLIBS)

ifeq ($(CUDA),1)
all: $(BUILD)/cu_gemv_bench
endif

# the CUDA GEMV by shape (tools/cu_gemv_bench.c; CUDA=1 builds only, a GPU to run)
$(BUILD)/cu_gemv_bench: tools/cu_gemv_bench.c $(BUILD)/libtandem.a
	$(CC) $(CPPFLAGS) $(WFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libtandem.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libtandem.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WFLAGS) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libtandem.a $(LDLIBS)

test-quick: all
	@BUILD=$(BUILD) sh tests/run.sh $(BUILD)/tests

# The sanitizer tier: the same unit tests, built with ASan+UBSan into build-san/ (on every CPU: make test
# runs without -j; its time in build-san/build-secs).
test-san:
	@rm -f build-san/build-secs; t0=$$(date +%s); $(MAKE) --no-print-directory -j$$(nproc) BUILD=build-san O=1 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  build-san/libtandem.a $(TESTS:$(BUILD)/%=build-san/%) && echo $$(($$(date +%s) - t0)) > build-san/build-secs
	@rm -f build-san/tandem # not built here: one left by an older build would be run by test_cli.sh stale
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TM_SANITIZER=1 sh tests/run.sh build-san/tests

# The CUDA engine's sources compile warning-free wherever nvcc is (no GPU needed; make test runs this
# when it finds $(NVCC), else says so): its tests need a GPU and print SKIP without one.
# (one object per source, so make -j compiles them side by side; FORCE: every run compiles them all, as the
# headers they include elsewhere in src/ are not tracked here)
CUDA_CHECK := $(patsubst src/engine/cuda/%,$(BUILD)/cuda-check/%.o,$(sort $(wildcard src/engine/cuda/*.cu src/engine/cuda/*.c))) \
              $(BUILD)/cuda-check/cu_gemv_bench.c.o
$(BUILD)/cuda-check/%.cu.o: src/engine/cuda/%.cu FORCE
	@mkdir -p $(dir $@)
	@$(NVCC) -O3 -std=c++17 -Iinclude -Isrc $(CU_ARCH) -Xcompiler -Wall,-Wextra,-Werror -c $< -o $@
CUDA_CHECK_CC = @mkdir -p $(dir $@) && $(CC) $(CPPFLAGS) -DTM_CUDA -I$(CUDA_HOME)/include $(WFLAGS) -Werror $(CFLAGS) -c $< -o $@
$(BUILD)/cuda-check/%.c.o: src/engine/cuda/%.c FORCE
	$(CUDA_CHECK_CC)
$(BUILD)/cuda-check/cu_gemv_bench.c.o: tools/cu_gemv_bench.c FORCE
	$(CUDA_CHECK_CC)
cuda-check: $(CUDA_CHECK)
	@echo "cuda-check: the CUDA engine's $$(ls src/engine/cuda/*.cu src/engine/cuda/*.c | wc -l) sources and tools/cu_gemv_bench.c compile (nvcc $$($(NVCC) --version | grep -o 'release [0-9.]*'))"

# the fuzz targets' sources compile (libFuzzer builds them with clang: `make fuzz`); here gcc checks them
fuzz-check: $(BUILD)/gen/build_id.h
	@for f in $(FUZZ_SRC); do $(CC) $(CPPFLAGS) $(WFLAGS) -Werror -fsyntax-only $$f || exit 1; done
	@echo "fuzz-check: the $(words $(FUZZ_SRC)) fuzz targets' sources compile"

test: all kbench-ab fuzz-check
	@if [ -x $(NVCC) ]; then $(MAKE) --no-print-directory -j$$(nproc) cuda-check || exit 1; \
	 else echo "cuda-check: no $(NVCC) here, the CUDA engine's sources not compiled"; fi
	@echo "== tier 1: unit and conformance tests =="
	@t0=$$(date +%s); sh tests/run.sh $(BUILD)/tests > $(BUILD)/test-quick.log 2>&1; rc=$$?; cat $(BUILD)/test-quick.log; \
	 t1=$$(date +%s); echo "(tier 1: $$((t1 - t0)) s)"; echo "== tier 2: ASan+UBSan =="; \
	 $(MAKE) --no-print-directory test-san > $(BUILD)/test-san.log 2>&1; rc2=$$?; grep -vE '^(gcc|cc|ar) ' $(BUILD)/test-san.log | grep -v '^make' ; \
	 t2=$$(date +%s); echo "(tier 2: $$((t2 - t1)) s, its build included: $$(cat build-san/build-secs 2>/dev/null || echo '?') s)"; \
	 p=$$(tail -n1 $(BUILD)/test-quick.log | cut -d' ' -f1); f=$$(tail -n1 $(BUILD)/test-quick.log | cut -d' ' -f3); \
	 p2=$$(tail -n1 $(BUILD)/test-san.log | cut -d' ' -f1); f2=$$(tail -n1 $(BUILD)/test-san.log | cut -d' ' -f3); \
	 case "$$p2" in ''|*[!0-9]*) p2=0; f2=1;; esac; \
	 echo "== total =="; echo "$$((p + p2)) passed, $$((f + f2)) failed"; \
	 [ $$rc -eq 0 ] && [ $$rc2 -eq 0 ]

deps:
	@sh tools/deps.sh

DEMO_PROMPT ?= Once upon a time, there was a little girl who
demo: deps
	@$(MAKE) --no-print-directory -j2 $(BUILD)/tandem
	@sh tools/demo.sh "$(DEMO_PROMPT)"

fuzz:
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang \
	  CFLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libtandem.a
	@mkdir -p build-fuzz/bin
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); echo "  FUZZ build-fuzz/bin/$$n"; \
	  clang $(CPPFLAGS) -g -O1 -fsanitize=fuzzer,address,undefined -o build-fuzz/bin/$$n $$f \
	    build-fuzz/libtandem.a $(LDLIBS) || exit 1; done

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
