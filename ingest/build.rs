//! Compiles the processor check (`src/cpu_check.c`) for the base x86-64, told which level of
//! x86-64 the Rust code is compiled for (`.cargo/config.toml`, or `RUSTFLAGS`).

fn main() {
    println!("cargo:rerun-if-changed=src/cpu_check.c");
    // Where `cpu.rs` asks for it: x86-64 outside Windows (a constructor and `unistd.h`).
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64")
        || std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("windows")
    {
        return;
    }
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let has = |fs: &[&str]| fs.iter().all(|f| features.split(',').any(|g| g == *f));
    // The features of each level that `cpu_check.c` asks for, as Rust names them.
    let levels: [&[&str]; 3] = [
        &["popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"],
        &["avx", "avx2", "bmi1", "bmi2", "fma"],
        &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
    ];
    let level = 1 + levels.iter().take_while(|fs| has(fs)).count();
    cc::Build::new()
        .file("src/cpu_check.c")
        // Whatever flags the C compiler was given for the target: this file must run anywhere.
        .flag("-march=x86-64")
        .define("AORTA_X86_LEVEL", level.to_string().as_str())
        .compile("aorta_cpu_check");
}
