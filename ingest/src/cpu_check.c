/*
 * aorta's processor check: one line instead of SIGILL.
 *
 * The workspace builds for x86-64-v3 (`.cargo/config.toml`), and with AVX enabled the Rust
 * compiler writes even plain copies of 16 bytes as AVX instructions, so no Rust function of
 * this build can be trusted to run on an older processor, not even one that only asks CPUID.
 * This file is compiled for the base x86-64 (`build.rs`) and runs as a constructor, before
 * `main` and before anything of Rust's: it exits with one line where the processor lacks a
 * feature of the level `AORTA_X86_LEVEL` the Rust code was compiled for.
 * `__builtin_cpu_supports` counts AVX and AVX-512 only where the OS saves their registers.
 */
#include <string.h>
#include <unistd.h>

#ifndef AORTA_X86_LEVEL
#define AORTA_X86_LEVEL 1
#endif

static void say(const char *s) {
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

__attribute__((constructor)) static void aorta_cpu_check(void) {
    const char *lacking[16];
    int n = 0;
    __builtin_cpu_init();
    /* Each feature as the C compiler names it, then as rustc (and the message) does. */
#define NEED(f, name) \
    if (!__builtin_cpu_supports(f)) lacking[n++] = name
#if AORTA_X86_LEVEL >= 2
    NEED("popcnt", "popcnt");
    NEED("sse3", "sse3");
    NEED("ssse3", "ssse3");
    NEED("sse4.1", "sse4.1");
    NEED("sse4.2", "sse4.2");
#endif
#if AORTA_X86_LEVEL >= 3
    NEED("avx", "avx");
    NEED("avx2", "avx2");
    NEED("bmi", "bmi1");
    NEED("bmi2", "bmi2");
    NEED("fma", "fma");
#endif
#if AORTA_X86_LEVEL >= 4
    NEED("avx512f", "avx512f");
    NEED("avx512bw", "avx512bw");
    NEED("avx512cd", "avx512cd");
    NEED("avx512dq", "avx512dq");
    NEED("avx512vl", "avx512vl");
#endif
#undef NEED
    if (n == 0) {
        return;
    }
    say("aorta: error: this build of aorta is for x86-64-v");
    char level[2] = {(char)('0' + AORTA_X86_LEVEL), 0};
    say(level);
    say(" and this processor lacks ");
    for (int i = 0; i < n; i++) {
        say(i ? ", " : "");
        say(lacking[i]);
    }
    say(": build it for this processor with RUSTFLAGS=\"-C target-cpu=native\" cargo build "
        "--release (README.md, \"Building\")\n");
    _exit(2);
}

/* Referenced from Rust (`aorta_ingest::cpu`), so that the linker keeps this file. */
int aorta_cpu_checked(void) {
    return 1;
}
