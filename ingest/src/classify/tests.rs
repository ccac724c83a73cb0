//! The rule table against the families METRICS.md names, and user rules.
use super::*;

#[test]
fn metrics_md_families() {
    let c = Classifier::builtin();
    let k = |n| c.classify(Kind::Kernel, n).0;
    assert_eq!(
        k("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
        Category::Comm
    );
    assert_eq!(k("void ncclDevKernel_Generic_1(x)"), Category::Comm);
    assert_eq!(k("rcclGenericKernel<1>"), Category::Comm);
    assert_eq!(k("kuserbuffers_pushrecv"), Category::Comm);
    assert_eq!(k("cross_device_reduce_2stage<bf16>"), Category::Comm);
    assert_eq!(
        k("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"),
        Category::Gemm
    );
    assert_eq!(k("sm90_xmma_gemm_bf16bf16_bf16f32"), Category::Gemm);
    assert_eq!(k("Cijk_Ailk_Bljk_BBS_BH_MT64x32x256"), Category::Gemm);
    assert_eq!(k("igemm_fwd_gtcx3_nhwc_bf16"), Category::OtherCompute);
    assert_eq!(k("flash_fwd_kernel"), Category::Attention);
    assert_eq!(
        k("at::native::vectorized_elementwise_kernel"),
        Category::OtherCompute
    );
    assert_eq!(
        c.classify(Kind::Memcpy, "Memcpy PtoP (Device -> Device)").0,
        Category::Comm
    );
    assert_eq!(
        c.classify(Kind::Memcpy, "Memcpy HtoD (Pinned -> Device)").0,
        Category::Memcpy
    );
    assert_eq!(
        c.classify(Kind::Kernel, "__amd_rocclr_fillBufferAligned").0,
        Category::Memset
    );
}

#[test]
fn collective_kinds() {
    let c = Classifier::builtin();
    let op = |n| c.classify(Kind::Kernel, n).1;
    assert_eq!(
        op("ncclKernel_AllReduce_RING_LL_Sum_float"),
        Some("all_reduce")
    );
    assert_eq!(
        op("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"),
        Some("reduce_scatter")
    );
    assert_eq!(op("ncclKernel_Reduce_RING_LL_Sum_float"), Some("reduce"));
    assert_eq!(
        op("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
        Some("send_recv")
    );
    assert_eq!(op("ncclDevKernel_Generic_1"), Some("other"));
    assert_eq!(op("nvjet_tst"), None);
    assert_eq!(c.collective_op("_allgather_base"), Some("all_gather"));
    assert_eq!(c.collective_op("allreduce"), Some("all_reduce"));
    assert_eq!(
        c.collective_op("reduce_scatter_tensor_coalesced"),
        Some("reduce_scatter")
    );
    assert_eq!(c.collective_op("wait"), None);
}

/// `function` rules look past return types and namespaces, never into template
/// arguments or parameters (hand-written names around one real kernel name).
#[test]
fn function_rules_match_the_function_name_only() {
    let c = Classifier::builtin();
    let k = |n| c.classify(Kind::Kernel, n);
    let comm = Some("all_reduce");
    for name in [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void ncclx::ncclDevKernel_AllReduce_Sum_f32_RING_LL(int)",
        "std::enable_if<true, void>::type (anonymous namespace)::one_shot_all_reduce_kernel<float, 16, 8>(float**)",
        "void at::(anonymous namespace)::multimem_all_reduce_kernel<float, 4>(float*)",
    ] {
        assert_eq!(k(name), (Category::Comm, comm), "{name}");
    }
    for name in [
        "void at::native::vectorized_elementwise_kernel<4, ncclAllReduceFunctor>(int)",
        "void my_kernel<foo<bar>, ncclDevKernel_AllReduce>(int)",
        "void copy_kernel(ncclDevComm*, one_shot_all_reduce_kernel*)",
        "void fused<multimem_all_reduce_kernel>(int)",
    ] {
        assert_eq!(k(name), (Category::OtherCompute, None), "{name}");
    }
}

#[test]
fn a_rule_has_pattern_or_function() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.toml");
    for body in ["", "pattern = 'a'\nfunction = 'b'\n"] {
        let rule = format!("[[rule]]\nkind = \"kernel\"\n{body}category = \"comm\"\n");
        std::fs::write(&p, rule).unwrap();
        let err = Classifier::with_user_rules(Some(&p))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("either `pattern` or `function`"), "{err}");
    }
    std::fs::write(
        &p,
        "[[rule]]\nkind = \"kernel\"\nfunction = '('\ncategory = \"comm\"\n",
    )
    .unwrap();
    let err = Classifier::with_user_rules(Some(&p))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("pattern `(`: unclosed group"), "{err}");
}

#[test]
fn user_rules_come_first() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.toml");
    std::fs::write(
        &p,
        "[[rule]]\nkind = \"kernel\"\npattern = '^my_fused_allreduce'\ncategory = \"comm\"\n",
    )
    .unwrap();
    let c = Classifier::with_user_rules(Some(&p)).unwrap();
    let v = c.version().to_string();
    let shipped = format!("{}+user.", Classifier::builtin().version());
    assert!(
        v.starts_with(&shipped) && v.len() == shipped.len() + 16,
        "{v}"
    );
    assert_eq!(
        c.classify(Kind::Kernel, "my_fused_allreduce_gemm").0,
        Category::Comm
    );
    std::fs::write(
        &p,
        "[[rule]]\nkind = \"kernel\"\npattern = 'x'\ncategory = \"gpu\"\n",
    )
    .unwrap();
    let err = Classifier::with_user_rules(Some(&p))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("unknown category `gpu`"), "{err}");
    // Another file, another version; the same file, the same version.
    std::fs::write(
        &p,
        "[[rule]]\nkind = \"kernel\"\npattern = '^my_fused_allreduce'\ncategory = \"gemm\"\n",
    )
    .unwrap();
    let edited = Classifier::with_user_rules(Some(&p)).unwrap();
    assert_ne!(edited.version(), v);
    assert_eq!(
        Classifier::with_user_rules(Some(&p)).unwrap().version(),
        edited.version()
    );
    std::fs::write(
        &p,
        "[[rule]]\nkind = \"kernel\"\npattern = '('\ncategory = \"comm\"\n",
    )
    .unwrap();
    let err = Classifier::with_user_rules(Some(&p))
        .err()
        .unwrap()
        .to_string();
    assert!(err.starts_with(&p.display().to_string()), "{err}");
    assert!(
        err.contains("pattern `(`: unclosed group") && !err.contains('\n'),
        "{err}"
    );
}
