//! Allocator settings for the ingest process (glibc only).

/// Makes glibc return large freed buffers to the OS at once, and keep the small ones.
///
/// Ingest allocates and frees multi-megabyte buffers (read chunks, row batches) from several
/// threads; glibc's adaptive mmap threshold then keeps them in its heaps, and peak RSS on a
/// 1 GB trace measured 294 MB instead of 208 MB (docs/PERFORMANCE.md): blocks of 1 MiB and
/// more are mapped, and unmapped when freed. Smaller blocks (a parser's rows, under a
/// megabyte a batch) are freed and allocated again thousands of times a second; with the
/// default trim threshold (128 KiB) glibc handed their pages back each time and the kernel
/// zeroed fresh ones (perf: a sixth of single-core Kineto ingest time was page faults, half
/// of them on such pages). A 128 MiB threshold keeps them: Kineto 1 GiB, system time 0.31-0.40 -> 0.23-0.28 s, peak RSS
/// 133 -> 134 MB. Call once, at start.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called before any threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}
