//! GPU workloads that produce real traces (cudarc / hip-sys). Filled by the workloads issue.
