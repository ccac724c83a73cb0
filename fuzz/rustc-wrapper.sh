#!/usr/bin/env bash
# RUSTC_WRAPPER for `cargo fuzz build` (docs/FUZZING.md): compiles the heavy dependencies
# (Parquet, Arrow, compression, regex, rayon) without coverage instrumentation. Their edges
# would not guide the fuzzer through aorta's readers, and libFuzzer scans every edge counter
# after every run: instrumenting only aorta and the parsers it drives (serde_json, csv, toml,
# memchr) roughly doubles the executions per second.
rustc=$1
shift
name=
prev=
for a in "$@"; do
    [ "$prev" = --crate-name ] && name=$a
    prev=$a
done
case "$name" in
parquet | arrow* | zstd* | regex* | rayon* | crossbeam* | zlib_rs | flate2 | liblzma* | bzip2* | \
    lexical* | chrono* | num* | half | hashbrown | thrift | twox_hash | rusqlite | libsqlite3_sys | \
    xxhash_rust | tempfile | rustix | libc | hashlink | bytemuck* | seq_macro | simdutf8 | ordered_float)
    args=()
    skip=
    for a in "$@"; do
        if [ -n "$skip" ]; then
            skip=
            case "$a" in passes=sancov-module | llvm-args=-sanitizer-coverage*) continue ;; esac
            args+=(-C "$a")
            continue
        fi
        case "$a" in
        -Cpasses=sancov-module | -Cllvm-args=-sanitizer-coverage*) ;;
        -C) skip=1 ;;
        *) args+=("$a") ;;
        esac
    done
    exec "$rustc" "${args[@]}"
    ;;
esac
exec "$rustc" "$@"
