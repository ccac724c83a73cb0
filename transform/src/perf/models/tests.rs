//! Every modelled operator kind against FLOPs and bytes written out by hand from the formulas
//! (METRICS.md, docs/PERF.md): each row gives the shapes as Kineto records them and the
//! expected count as arithmetic on those shapes, not as the code's output.

use super::{estimate, kernel_gemm, Estimate, Kind};
use crate::perf::args::{Dtype, OpArgs};

const BF16: &str = "c10::BFloat16";

fn args(dims: &str, types: &[&str], concrete: &[&str]) -> OpArgs {
    let q = |v: &[&str]| {
        let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", items.join(", "))
    };
    OpArgs::parse(Some(dims), Some(&q(types)), Some(&q(concrete)))
}

fn est(op: &str, a: &OpArgs) -> Estimate {
    estimate(op, a)
        .unwrap_or_else(|| panic!("{op} has a model"))
        .unwrap_or_else(|e| panic!("{op}: {e}"))
}

fn flops(op: &str, a: &OpArgs) -> i64 {
    est(op, a).flops.expect("a FLOPs model")
}

/// (op, dims, types, concrete, expected FLOPs).
type Case<'a> = (&'a str, &'a str, Vec<&'a str>, Vec<&'a str>, i64);

/// GEMMs, 2·M·N·K × batch.
#[test]
fn gemm_flops_by_hand() {
    let rows: Vec<Case> = vec![
        // qwen's projection: [8944, 1024] × [1024, 1024], B given transposed (strides [1, 1024]:
        // the dims are logical, so the FLOPs are those of the untransposed product).
        (
            "aten::mm",
            "[[8944, 1024], [1024, 1024]]",
            vec![BF16, BF16],
            vec!["", ""],
            2 * 8944 * 1024 * 1024,
        ),
        // addmm(bias[512], A[141, 512], B[512, 512], beta, alpha): the bias adds no FLOPs.
        (
            "aten::addmm",
            "[[512], [141, 512], [512, 512], [], []]",
            vec![BF16, BF16, BF16, "Scalar", "Scalar"],
            vec!["", "", "", "1", "1"],
            2 * 141 * 512 * 512,
        ),
        (
            "aten::bmm",
            "[[16, 559, 64], [16, 64, 559]]",
            vec![BF16, BF16],
            vec!["", ""],
            2 * 16 * 559 * 559 * 64,
        ),
        (
            "aten::baddbmm",
            "[[16, 1, 559], [16, 559, 64], [16, 64, 559], [], []]",
            vec![BF16, BF16, BF16, "Scalar", "Scalar"],
            vec!["", "", "", "1", "1"],
            2 * 16 * 559 * 559 * 64,
        ),
        // matmul, broadcast batch: [2, 1, 64, 32] × [3, 32, 16] → batch [2, 3].
        (
            "aten::matmul",
            "[[2, 1, 64, 32], [3, 32, 16]]",
            vec!["float", "float"],
            vec!["", ""],
            2 * (2 * 3) * 64 * 16 * 32,
        ),
        // matmul of a 3-D by a 2-D (a linear layer without bias): rows = 16·559.
        (
            "aten::matmul",
            "[[16, 559, 1024], [1024, 2816]]",
            vec![BF16, BF16],
            vec!["", ""],
            2 * 16 * 559 * 2816 * 1024,
        ),
        // matmul of a matrix by a vector: N = 1.
        (
            "aten::matmul",
            "[[32, 1], [1]]",
            vec!["float", "float"],
            vec!["", ""],
            2 * 32,
        ),
        // qwen's rotary matmul: [1, 32, 1] × [1, 1, 559], K = 1.
        (
            "aten::matmul",
            "[[1, 32, 1], [1, 1, 559]]",
            vec!["float", "float"],
            vec!["", ""],
            2 * 32 * 559,
        ),
        // linear(x[16, 559, 1024], W[1024, 1024], b): 2·(16·559)·1024·1024.
        (
            "aten::linear",
            "[[16, 559, 1024], [1024, 1024], [1024]]",
            vec![BF16, BF16, BF16],
            vec!["", "", ""],
            2 * 16 * 559 * 1024 * 1024,
        ),
        // fp8 _scaled_mm(A[4096, 8192], B[8192, 2048], scale_a, scale_b, bias, scale_result,
        // out_dtype = 15 (bf16), fast_accum).
        (
            "aten::_scaled_mm",
            "[[4096, 8192], [8192, 2048], [], [], [], [], [], []]",
            vec![
                "c10::Float8_e4m3fn",
                "c10::Float8_e4m3fn",
                "float",
                "float",
                "",
                "",
                "Scalar",
                "Scalar",
            ],
            vec!["", "", "", "", "", "", "15", "False"],
            2 * 4096 * 2048 * 8192,
        ),
        // grouped (MoE): A[ΣM = 3000, 512] by B[8 experts, 512, 1024].
        (
            "aten::_grouped_mm",
            "[[3000, 512], [8, 512, 1024], [8]]",
            vec![BF16, BF16, "int"],
            vec!["", "", ""],
            2 * 3000 * 1024 * 512,
        ),
        // grouped, 3-D by 3-D: 4 groups of [128, 256] × [256, 64].
        (
            "aten::_grouped_mm",
            "[[4, 128, 256], [4, 256, 64]]",
            vec![BF16, BF16],
            vec!["", ""],
            2 * 4 * 128 * 64 * 256,
        ),
        // grouped weight gradient, 2-D by 2-D along K = Σ tokens: [1024, 3000] × [3000, 512].
        (
            "aten::_grouped_mm",
            "[[1024, 3000], [3000, 512], [8]]",
            vec![BF16, BF16, "int"],
            vec!["", "", ""],
            2 * 1024 * 512 * 3000,
        ),
    ];
    for (op, dims, types, concrete, want) in rows {
        let a = args(dims, &types, &concrete);
        assert_eq!(flops(op, &a), want, "{op} {dims}");
        assert_eq!(est(op, &a).kind, Kind::Gemm, "{op}");
    }
}

#[test]
fn gemm_bytes_read_inputs_and_write_the_product() {
    // mm [8944, 1024] × [1024, 1024] bf16: A + B read, C [8944, 1024] written, 2 bytes each.
    let a = args("[[8944, 1024], [1024, 1024]]", &[BF16, BF16], &["", ""]);
    let want = (8944 * 1024 + 1024 * 1024 + 8944 * 1024) * 2;
    assert_eq!(est("aten::mm", &a).bytes, Some(want));
    // fp8 _scaled_mm writes bf16 (out_dtype 15); the fp32 scales are 0-dim: 4 bytes each.
    let a = args(
        "[[64, 128], [128, 32], [], []]",
        &[
            "c10::Float8_e4m3fn",
            "c10::Float8_e4m3fn",
            "float",
            "float",
            "",
            "",
            "Scalar",
        ],
        &["", "", "", "", "", "", "15"],
    );
    let e = est("aten::_scaled_mm", &a);
    assert_eq!(e.bytes, Some(64 * 128 + 128 * 32 + 4 + 4 + 64 * 32 * 2));
    assert_eq!(e.dtype, Some(Dtype::Fp8));
}

/// Attention: forward 4·B·H·Sq·Sk·D, backward 2.5×, causal ½.
#[test]
fn attention_flops_by_hand() {
    let (b, h, s, d) = (16i64, 16i64, 559i64, 64i64);
    let bhsd = "[[16, 16, 559, 64], [16, 16, 559, 64], [16, 16, 559, 64], [], [], [], [], []]";
    let bshd = "[[16, 559, 16, 64], [16, 559, 16, 64], [16, 559, 16, 64], [], [], [], [], [], [], [], [], [], [], [], []]";
    let fwd = 4 * b * h * s * s * d;
    let t3 = [BF16, BF16, BF16];
    let cases: Vec<(&str, &str, Vec<&str>, i64)> = vec![
        // Public op, is_causal at 5: qwen (causal) and bert (not).
        (
            "aten::scaled_dot_product_attention",
            bhsd,
            vec!["", "", "", "", "0.", "True", "0.125", "False"],
            fwd / 2,
        ),
        (
            "aten::scaled_dot_product_attention",
            bhsd,
            vec!["", "", "", "", "0.", "False", "", "False"],
            fwd,
        ),
        (
            "aten::_scaled_dot_product_flash_attention",
            bhsd,
            vec!["", "", "", "0.", "True", "False", "0.125"],
            fwd / 2,
        ),
        (
            "aten::_scaled_dot_product_efficient_attention",
            bhsd,
            vec!["", "", "", "", "True", "0.", "False"],
            fwd,
        ),
        (
            "aten::_scaled_dot_product_cudnn_attention",
            bhsd,
            vec!["", "", "", "", "True", "0.", "True", "False"],
            fwd / 2,
        ),
        // The flash kernel's own op: [B, S, H, D], is_causal at 8.
        (
            "aten::_flash_attention_forward",
            bshd,
            vec![
                "", "", "", "", "", "559", "559", "0.", "True", "False", "0.125",
            ],
            fwd / 2,
        ),
        // The efficient kernel's op: custom_mask_type at 9 (1 = causal from the top left).
        (
            "aten::_efficient_attention_forward",
            bshd,
            vec!["", "", "", "", "", "", "", "", "0.", "1", "True"],
            fwd / 2,
        ),
        (
            "aten::_efficient_attention_forward",
            bshd,
            vec!["", "", "", "", "", "", "", "", "0.", "0", "True"],
            fwd,
        ),
    ];
    for (op, dims, concrete, want) in cases {
        let a = args(dims, &t3, &concrete);
        assert_eq!(flops(op, &a), want, "{op} {concrete:?}");
        assert_eq!(est(op, &a).kind, Kind::Attention);
    }
    // Backward: grad_out first, Q/K/V at 1..3; 2.5 × forward, causal halves.
    let bwd_bhsd = "[[16, 16, 559, 64], [16, 16, 559, 64], [16, 16, 559, 64], [16, 16, 559, 64], [16, 16, 559, 64], [16, 16, 559]]";
    let t6 = [BF16, BF16, BF16, BF16, BF16, "float"];
    let mut c = vec![""; 16];
    c[11] = "True";
    let a = args(bwd_bhsd, &t6, &c);
    assert_eq!(
        flops("aten::_scaled_dot_product_flash_attention_backward", &a),
        fwd * 5 / 2 / 2
    );
    c[11] = "False";
    let a = args(bwd_bhsd, &t6, &c);
    assert_eq!(
        flops("aten::_scaled_dot_product_flash_attention_backward", &a),
        fwd * 5 / 2
    );
    assert_eq!(
        flops("aten::_scaled_dot_product_efficient_attention_backward", &a),
        fwd * 5 / 2
    );
    let mut c = vec![""; 16];
    c[14] = "True";
    let a = args(bwd_bhsd, &t6, &c);
    assert_eq!(
        flops("aten::_scaled_dot_product_cudnn_attention_backward", &a),
        fwd * 5 / 4
    );
    assert_eq!(
        est("aten::_scaled_dot_product_cudnn_attention_backward", &a).kind,
        Kind::AttentionBwd
    );
}

/// The ops that launch cuDNN's SDPA kernels in PyTorch 2.11 (under
/// `_scaled_dot_product_cudnn_attention{,_backward}`), with the arguments exactly as the
/// H200 trace records them (tests/golden/device/trust/sdpa_cudnn_attention): [B, H, S, D],
/// `is_causal` at 10 forward and 14 backward, `cum_seq_q` at 4 and 9.
#[test]
fn cudnn_kernel_ops_are_attention_by_hand() {
    let (b, h, s, d) = (4i64, 16i64, 2048i64, 128i64);
    let fwd = 4 * b * h * s * s * d;
    let q = "[4, 16, 2048, 128]";
    let f_dims = format!("[{q}, {q}, {q}, [], [], [], [], [], [], [], [], [], []]");
    let f_types = [
        BF16, BF16, BF16, "", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
        "",
    ];
    let mut f_conc = [
        "", "", "", "", "", "", "2048", "2048", "True", "0.", "False", "False", "",
    ];
    let a = args(&f_dims, &f_types, &f_conc);
    assert_eq!(flops("aten::_cudnn_attention_forward", &a), fwd);
    assert_eq!(
        est("aten::_cudnn_attention_forward", &a).kind,
        Kind::Attention
    );
    f_conc[10] = "True";
    let a = args(&f_dims, &f_types, &f_conc);
    assert_eq!(flops("aten::_cudnn_attention_forward", &a), fwd / 2);
    let b_dims = format!(
        "[{q}, {q}, {q}, {q}, {q}, [4, 16, 2048, 1], [], [], [], [], [], [], [], [], [], []]"
    );
    let b_types = [
        BF16, BF16, BF16, BF16, BF16, "float", "long int", "long int", "", "", "", "Scalar",
        "Scalar", "Scalar", "Scalar", "",
    ];
    let mut b_conc = [
        "", "", "", "", "", "", "", "", "", "", "", "2048", "2048", "0.", "False", "",
    ];
    let a = args(&b_dims, &b_types, &b_conc);
    assert_eq!(flops("aten::_cudnn_attention_backward", &a), fwd * 5 / 2);
    assert_eq!(
        est("aten::_cudnn_attention_backward", &a).kind,
        Kind::AttentionBwd
    );
    b_conc[14] = "True";
    let a = args(&b_dims, &b_types, &b_conc);
    assert_eq!(flops("aten::_cudnn_attention_backward", &a), fwd * 5 / 4);
    // A variable-length batch (cum_seq_q given) has no estimate.
    let v_dims = format!("[{q}, {q}, {q}, [], [5], [5], [], [], [], [], [], [], []]");
    let mut v_types = f_types;
    (v_types[4], v_types[5]) = ("int", "int");
    let a = args(&v_dims, &v_types, &f_conc);
    assert!(estimate("aten::_cudnn_attention_forward", &a)
        .unwrap()
        .is_err());
}

#[test]
fn attention_with_grouped_query_heads_and_unequal_lengths() {
    // GQA: 32 query heads, 8 KV heads; Sq = 128 against Sk = 4096 (decode-like), D = 128.
    let dims = "[[2, 32, 128, 128], [2, 8, 4096, 128], [2, 8, 4096, 128], [], [], [], [], []]";
    let a = args(
        dims,
        &[BF16, BF16, BF16],
        &["", "", "", "", "0.", "False", "", "True"],
    );
    assert_eq!(
        flops("aten::scaled_dot_product_attention", &a),
        4 * 2 * 32 * 128 * 4096 * 128
    );
    // Head dims of QK and V may differ (MLA: 192 and 128): 2·BH·Sq·Sk·(Dqk + Dv).
    let dims = "[[1, 4, 64, 192], [1, 4, 64, 192], [1, 4, 64, 128], [], [], [], [], []]";
    let a = args(
        dims,
        &[BF16, BF16, BF16],
        &["", "", "", "", "0.", "False", "", "False"],
    );
    assert_eq!(
        flops("aten::scaled_dot_product_attention", &a),
        2 * 4 * 64 * 64 * (192 + 128)
    );
    // Bytes: Q, K, V read, O [B, Hq, Sq, Dv] written.
    assert_eq!(
        est("aten::scaled_dot_product_attention", &a).bytes,
        Some((4 * 64 * 192 * 2 + 4 * 64 * 128 + 4 * 64 * 128) * 2)
    );
}

/// Convolution: 2·N·K·(C/groups)·R·S·P·Q per pass.
#[test]
fn conv_flops_by_hand() {
    let t3 = [
        BF16,
        BF16,
        BF16,
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
    ];
    // ResNet stem: x[8, 3, 224, 224], w[64, 3, 7, 7], stride 2, padding 3 → P = Q = 112.
    let a = args(
        "[[8, 3, 224, 224], [64, 3, 7, 7], [64], [], [], [], [], [], []]",
        &t3,
        &[
            "", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1",
        ],
    );
    assert_eq!(
        flops("aten::convolution", &a),
        2 * 8 * 64 * 3 * 7 * 7 * 112 * 112
    );
    // Grouped, strided: 32 groups, x[4, 256, 56, 56], w[256, 8, 3, 3], stride 2, pad 1 → 28.
    let a = args(
        "[[4, 256, 56, 56], [256, 8, 3, 3], [], [], [], [], [], [], []]",
        &t3,
        &["", "", "", "[2]", "[1]", "[1]", "False", "[0]", "32"],
    );
    assert_eq!(
        flops("aten::convolution", &a),
        2 * 4 * 256 * (256 / 32) * 3 * 3 * 28 * 28
    );
    // Depthwise with dilation 2: x[1, 64, 32, 32], w[64, 1, 3, 3], pad 2 → 32.
    let a = args(
        "[[1, 64, 32, 32], [64, 1, 3, 3], [], [], [], [], [], [], []]",
        &t3,
        &[
            "", "", "", "[1, 1]", "[2, 2]", "[2, 2]", "False", "[0, 0]", "64",
        ],
    );
    assert_eq!(flops("aten::convolution", &a), 2 * 64 * 3 * 3 * 32 * 32);
    // Transposed, stride 2: x[2, 128, 16, 16], w[128, 64, 4, 4] (C_in, C_out/g, R, S), pad 1
    // → out 32×32; the product runs over the input: 2·N·C_in·(C_out/g)·R·S·H·W.
    let a = args(
        "[[2, 128, 16, 16], [128, 64, 4, 4], [], [], [], [], [], [], []]",
        &t3,
        &[
            "", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[0, 0]", "1",
        ],
    );
    assert_eq!(
        flops("aten::convolution", &a),
        2 * 2 * 128 * 64 * 4 * 4 * 16 * 16
    );
    // cudnn_convolution(self, weight, padding, stride, dilation, groups, ...): a 1-D conv.
    let a = args(
        "[[4, 16, 100], [32, 16, 5], [], [], [], []]",
        &[
            BF16,
            BF16,
            "ScalarList",
            "ScalarList",
            "ScalarList",
            "Scalar",
        ],
        &["", "", "[2]", "[1]", "[1]", "1"],
    );
    assert_eq!(
        flops("aten::cudnn_convolution", &a),
        2 * 4 * 32 * 16 * 5 * 100
    );
    // conv2d(padding="same") keeps 56×56.
    let a = args(
        "[[1, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], []]",
        &[
            BF16,
            BF16,
            "",
            "ScalarList",
            "String",
            "ScalarList",
            "Scalar",
        ],
        &["", "", "", "[1, 1]", "same", "[1, 1]", "1"],
    );
    assert_eq!(flops("aten::conv2d", &a), 2 * 64 * 64 * 3 * 3 * 56 * 56);
}

#[test]
fn conv_backward_is_one_pass_per_gradient_asked_for() {
    // grad[8, 64, 112, 112], x[8, 3, 224, 224], w[64, 3, 7, 7]: one pass = 2·8·64·3·7·7·112².
    let pass = 2 * 8 * 64 * 3 * 7 * 7 * 112 * 112i64;
    let dims =
        "[[8, 64, 112, 112], [8, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], [], []]";
    let t = [
        BF16,
        BF16,
        BF16,
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
        "ScalarList",
    ];
    let with = |mask: &str| {
        let c = [
            "", "", "", "[0]", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1", mask,
        ];
        flops("aten::convolution_backward", &args(dims, &t, &c))
    };
    assert_eq!(with("[True, True, True]"), 2 * pass);
    // The first layer needs no grad input: its backward is one pass.
    assert_eq!(with("[False, True, False]"), pass);
}

#[test]
fn elementwise_and_reductions_count_bytes_only() {
    // add(x[1, 141, 512], y[1, 141, 512], alpha): x and y read, the sum written, bf16.
    let a = args(
        "[[1, 141, 512], [1, 141, 512], []]",
        &[BF16, BF16, "Scalar"],
        &["", "", "1"],
    );
    let e = est("aten::add", &a);
    assert_eq!(
        (e.kind, e.flops, e.bytes),
        (Kind::Elementwise, None, Some(3 * 141 * 512 * 2))
    );
    // Broadcast: mul(x[16, 559, 1024] fp32, s[16, 559, 1]) writes [16, 559, 1024].
    let a = args(
        "[[16, 559, 1024], [16, 559, 1]]",
        &["float", "float"],
        &["", ""],
    );
    assert_eq!(
        est("aten::mul", &a).bytes,
        Some((2 * 16 * 559 * 1024 + 16 * 559) * 4)
    );
    // mul.out(grad[4096, 4096] fp32, factor (0-dim double), *, out[4096, 4096]) as DDP's
    // `reducer::mul_out` records it (tests/golden/device/trust/ddp_tf32): grad and the
    // factor read, out written once, not read (it showed 136 % of the HBM roof).
    let a = args(
        "[[4096, 4096], [], [4096, 4096]]",
        &["float", "double", "float"],
        &["", "", ""],
    );
    assert_eq!(est("aten::mul", &a).bytes, Some(2 * 4096 * 4096 * 4 + 8));
    // add.out(x, y, alpha, *, out): the same; add(x, y, alpha) without out is unchanged.
    let a = args(
        "[[64], [64], [], [64]]",
        &[BF16, BF16, "Scalar", BF16],
        &["", "", "1", ""],
    );
    assert_eq!(est("aten::add", &a).bytes, Some(3 * 64 * 2));
    // copy_(dst bf16 [8944, 1024], src fp32): dst written once, src read once.
    let a = args(
        "[[8944, 1024], [8944, 1024], []]",
        &[BF16, "float", "Scalar"],
        &["", "", "False"],
    );
    assert_eq!(est("aten::copy_", &a).bytes, Some(8944 * 1024 * (2 + 4)));
    // mean(x[16, 559, 1024] fp32, [-1], keepdim): reads x, writes [16, 559, 1].
    let a = args(
        "[[16, 559, 1024], [], [], []]",
        &["float", "ScalarList", "Scalar", ""],
        &["", "[-1]", "True", ""],
    );
    let e = est("aten::mean", &a);
    assert_eq!(
        (e.kind, e.bytes),
        (Kind::Reduction, Some((16 * 559 * 1024 + 16 * 559) * 4))
    );
    // sum(x) without dims: one element out.
    let a = args("[[4, 8], []]", &["float", ""], &["", ""]);
    assert_eq!(est("aten::sum", &a).bytes, Some((32 + 1) * 4));
    // max(x, dim=1): a single-int dim.
    let a = args(
        "[[4, 8], [], []]",
        &["float", "Scalar", "Scalar"],
        &["", "1", "False"],
    );
    assert_eq!(est("aten::max", &a).bytes, Some((32 + 4) * 4));
}

#[test]
fn missing_or_unfit_shapes_say_why_and_unknown_ops_have_no_model() {
    // GPU-only or shape-less traces: the op has a model but no dims.
    let none = OpArgs::default();
    let e = estimate("aten::mm", &none).unwrap().unwrap_err();
    assert!(e.contains("no shape"), "{e}");
    // Inner dims disagree.
    let a = args("[[4, 8], [7, 2]]", &[BF16, BF16], &["", ""]);
    assert!(estimate("aten::mm", &a).unwrap().is_err());
    // is_causal not a flag (another PyTorch's signature): no guess.
    let a = args(
        "[[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]]",
        &[BF16, BF16, BF16],
        &["", "", "", "", "0.", "maybe"],
    );
    let e = estimate("aten::scaled_dot_product_attention", &a)
        .unwrap()
        .unwrap_err();
    assert!(e.contains("is_causal"), "{e}");
    // A variable-length flash batch (cum_seq_q given) has no per-sequence lengths.
    let a = args(
        "[[100, 8, 64], [100, 8, 64], [100, 8, 64], [5]]",
        &[BF16, BF16, BF16, "int"],
        &["", "", "", "", "", "50", "50", "0.", "True"],
    );
    let e = estimate("aten::_flash_attention_forward", &a)
        .unwrap()
        .unwrap_err();
    assert!(e.contains("variable-length"), "{e}");
    assert!(estimate("aten::embedding", &a).is_none());
    assert!(estimate("my_extension::fused_thing", &a).is_none());
}

#[test]
fn workload_kernel_args_are_a_gemm() {
    // aorta-overlap-bench: gemm_bf16_4096x4096x4096 → 2·4096³, bytes 3·4096²·2.
    let e = kernel_gemm(4096, 4096, 4096, Some(Dtype::Bf16)).unwrap();
    assert_eq!(e.flops, Some(2 * 4096i64.pow(3)));
    assert_eq!(e.bytes, Some(3 * 4096 * 4096 * 2));
    // fsdp_shapes: 8192 × 16384 × 4096.
    assert_eq!(
        kernel_gemm(8192, 16384, 4096, None).unwrap().flops,
        Some(2 * 8192 * 16384 * 4096)
    );
    assert!(kernel_gemm(-1, 2, 3, None).is_err());
}
