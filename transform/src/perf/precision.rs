//! The precision a GEMM really ran in, read from its kernels' names.
//!
//! An fp32 `aten::mm` runs on the CUDA cores (67 TFLOP/s on an H100) unless the framework
//! allows TF32 (`torch.backends.cuda.matmul.allow_tf32`), and then on the tensor cores at
//! seven times that. Kineto does not record the setting, but the libraries name the math
//! mode in every kernel they pick: cuBLAS and cuDNN `sm90_xmma_gemm_f32f32_tf32f32_f32_…`,
//! CUTLASS `cutlass_tensorop_s1688gemm_tf32_…`, and on ROCm hipBLASLt's Tensile kernels
//! `Cijk_…_S_MX_…` (fp32 data, math op XFloat32) or any name with `xf32`. Judging such a
//! GEMM by the FP32 peak gave MFU above 100 % (issue 31); it is judged by the TF32 peak.
//! Where no kernel name says (cuBLAS's `nvjet_*` names no precision), the setting decides if
//! the run's parameters record it, as aorta's own workloads do in `aorta_params`.

/// The peak-table key fp32 work is judged by: `tf32` when one of its kernels' names says
/// TF32/xf32; else, for a GEMM of a run whose parameters record the framework's TF32 setting
/// on (`allow_tf32`, as aorta's workloads write it into `aorta_params`), `tf32` unless every
/// kernel names plain fp32 math (FFMA, SIMT SGEMM); else `fp32`.
pub(crate) fn fp32_key<'a>(
    kernels: impl IntoIterator<Item = &'a str>,
    gemm: bool,
    tf32_allowed: bool,
) -> &'static str {
    let names: Vec<&str> = kernels.into_iter().collect();
    if names.iter().any(|k| math_mode(k).is_some()) {
        return "tf32";
    }
    if gemm && tf32_allowed && !names.iter().all(|k| is_plain_fp32(k)) {
        return "tf32";
    }
    "fp32"
}

/// A run's parameters (`runs.params`) record the TF32 matmul setting on: `allow_tf32` set to
/// true (JSON `true`, or Python's `True` inside a repr string).
pub(crate) fn allows_tf32(params: &str) -> bool {
    params.match_indices("allow_tf32").any(|(i, m)| {
        let rest = params[i + m.len()..].trim_start_matches(['\'', '"', '\\', ' ']);
        rest.strip_prefix(':')
            .map(|r| r.trim_start())
            .is_some_and(|r| r.starts_with("True") || r.starts_with("true"))
    })
}

/// A kernel whose name declares fp32 math on the CUDA cores.
fn is_plain_fp32(kernel: &str) -> bool {
    let lower = kernel.to_ascii_lowercase();
    ["ffma", "simt_sgemm", "volta_sgemm", "ampere_sgemm"]
        .iter()
        .any(|p| lower.contains(p))
}

/// The peak-table key of the math mode a kernel's name declares, when it is one the fp32
/// peak would misjudge: `tf32` (NVIDIA TF32, AMD xf32).
fn math_mode(kernel: &str) -> Option<&'static str> {
    let lower = kernel.to_ascii_lowercase();
    (lower.contains("tf32") || lower.contains("xf32") || is_tensile_xf32(kernel)).then_some("tf32")
}

/// A Tensile (hipBLASLt) kernel whose problem type is fp32 with the XFloat32 math op: its
/// name's type field is `S_MX` (`Cijk_Alik_Bljk_S_MX_B_UserArgs_MT128x128x32_…`).
fn is_tensile_xf32(kernel: &str) -> bool {
    kernel.contains("Cijk_") && kernel.contains("_S_MX_")
}

#[cfg(test)]
mod tests {
    use super::{allows_tf32, fp32_key, math_mode};

    #[test]
    fn tf32_and_xf32_kernels_are_named_so_and_plain_fp32_ones_are_not() {
        // The DDP TF32 run's cuBLAS GEMMs (tests/golden/device/trust/ddp_tf32_rank0).
        let tf32 = [
            "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
            // cuDNN and CUTLASS TF32 (tests/golden/kernel_categories.csv).
            "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",
            "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4>(cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align4::Params)",
            // hipBLASLt's fp32 GEMM with the XFloat32 math op (gfx950 Tensile library name).
            "Cijk_Alik_Bljk_S_MX_B_UserArgs_MT128x128x32_MI16x16x1_SN_LDSB0_AFC0",
            "some_gemm_xf32_kernel",
        ];
        for k in tf32 {
            assert_eq!(math_mode(k), Some("tf32"), "{k}");
        }
        // The math SDPA backend's fp32 GEMMs (tests/golden/device/trust/sdpa_math): FFMA on
        // the CUDA cores, and hipBLASLt's plain fp32 and bf16 GEMMs.
        let plain = [
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>(cutlass_80_simt_sgemm_128x128_8x4_nt_align1::Params)",
            "Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT256x128x16_MI16x16x1",
            "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1",
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT",
        ];
        for k in plain {
            assert_eq!(math_mode(k), None, "{k}");
        }
        // The setting, where the run records it, decides for a GEMM kernel that names no
        // mode (cuBLAS's `nvjet_*`), never against a name that says plain fp32.
        assert_eq!(fp32_key([tf32[0]], true, false), "tf32");
        assert_eq!(fp32_key([plain[4]], true, false), "fp32");
        assert_eq!(fp32_key([plain[4]], true, true), "tf32");
        assert_eq!(fp32_key([plain[4]], false, true), "fp32", "only GEMMs");
        assert_eq!(fp32_key([plain[0], plain[1]], true, true), "fp32");
        // `runs.params` of the DDP TF32 trace (tests/golden/device/trust/): aorta_params as
        // the Python repr string Kineto keeps.
        let params = r#"{"aorta_params":"{'workload': 'trust_traces.ddp_tf32', 'allow_tf32': True, 'hidden': 4096}"}"#;
        assert!(allows_tf32(params));
        assert!(allows_tf32(r#"{"allow_tf32": true}"#));
        assert!(!allows_tf32(r#"{"aorta_params":"{'allow_tf32': False}"}"#));
        assert!(!allows_tf32(r#"{"workload": "x"}"#));
    }
}
