//! The shipped `[[subcategory]]` rows against tests/golden/kernel_subcategories.csv: real
//! `other_compute` kernel names of the corpus (CUDA and ROCm), each with the operator that
//! launched it, the annotation or operator around that (when one decides), and the
//! subcategory a reviewer gave it by hand, with the reason.

use aorta_ingest::subcategory::{Subclassifier, SUBCATEGORIES};

#[test]
fn every_golden_kernel_gets_its_reviewed_subcategory() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/golden/kernel_subcategories.csv"
    );
    let mut rdr = csv::Reader::from_path(path).expect("golden table present");
    let c = Subclassifier::builtin();
    let (mut rows, mut wrong, mut vendors, mut seen) = (0, Vec::new(), vec![], vec![]);
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let (vendor, name, op, within, want) = (&rec[0], &rec[1], &rec[2], &rec[3], &rec[4]);
        let op = (!op.is_empty()).then_some(op);
        // The one enclosing operator or annotation the row names, as `transform` passes it:
        // a bit per `within` pattern it matches.
        let mask = c
            .within_set()
            .matches(within)
            .into_iter()
            .fold(0u64, |m, b| m | (1 << b));
        let got = c.classify(name, op, if within.is_empty() { 0 } else { mask });
        rows += 1;
        vendors.push(vendor.to_string());
        seen.push(want.to_string());
        if got != want {
            wrong.push(format!(
                "got {got} want {want}: {name} (op {op:?}, within {within:?})"
            ));
        }
    }
    assert!(rows >= 50, "golden table has {rows} rows");
    assert_eq!(wrong, Vec::<String>::new(), "of {rows} rows");
    for v in ["cuda", "rocm"] {
        assert!(vendors.iter().any(|x| x == v), "no {v} row");
    }
    for s in SUBCATEGORIES.iter().filter(|s| **s != "fused") {
        assert!(seen.iter().any(|x| x == s), "no golden row for {s}");
    }
}

/// The corpus has no Triton kernel: names as TorchInductor writes them (its
/// `triton_{poi,red,per}_fused_<ops>_<n>` scheme, torch/_inductor/codegen/triton.py).
#[test]
fn inductor_triton_kernels_are_fused() {
    let c = Subclassifier::builtin();
    for name in [
        "triton_poi_fused_add_mul_0",
        "triton_red_fused__softmax_1",
        "triton_per_fused_native_layer_norm_2",
    ] {
        assert_eq!(c.classify(name, Some("aten::add"), 0), "fused", "{name}");
    }
    assert_eq!(c.classify("my_triton_helper", None, 0), "other");
}

#[test]
fn user_rows_declare_subcategories_and_come_first() {
    let text =
        "[[subcategory]]\nname = \"rope\"\nop = '^aten::(cos|sin)$'\nwithin = 'RotaryEmbedding'\n\
                why = \"rotary\"\n\n[[subcategory]]\nname = \"my_quant\"\nfunction = 'quantize_'\n";
    let c = Subclassifier::new(Some((text, "r.toml"))).unwrap();
    let names = c.names();
    assert_eq!(&names[..SUBCATEGORIES.len()], &SUBCATEGORIES);
    assert_eq!(&names[SUBCATEGORIES.len()..], &["rope", "my_quant"]);
    let cos = "void at::native::vectorized_elementwise_kernel<4, at::native::cos_kernel_cuda>(int)";
    let rotary = c
        .within_set()
        .matches("nn.Module: Qwen2RotaryEmbedding_0")
        .into_iter()
        .fold(0u64, |m, b| m | (1 << b));
    assert_ne!(rotary, 0);
    assert_eq!(c.classify(cos, Some("aten::cos"), rotary), "rope");
    // Without the module around it, or from another operator: the shipped rows decide.
    assert_eq!(c.classify(cos, Some("aten::cos"), 0), "elementwise");
    assert_eq!(c.classify(cos, Some("aten::mul"), rotary), "elementwise");
    assert_eq!(
        c.classify("void ns::quantize_rows<float>(float*)", None, 0),
        "my_quant"
    );
    // A user row wins over a shipped one that also matches.
    let norm = "void at::native::vectorized_layer_norm_kernel<float>(int)";
    let t = "[[subcategory]]\nname = \"ln\"\npattern = 'layer_norm'\n";
    let c = Subclassifier::new(Some((t, "r.toml"))).unwrap();
    assert_eq!(c.classify(norm, None, 0), "ln");
    assert_eq!(
        Subclassifier::builtin().classify(norm, None, 0),
        "normalization"
    );
}

#[test]
fn bad_subcategory_rows_name_the_file() {
    for (body, says) in [
        (
            "name = \"x\"\npattern = '('\n",
            "pattern `(`: unclosed group",
        ),
        ("name = \"x\"\nop = 'a('\n", "pattern `a(`"),
        (
            "name = \"x\"\n",
            "needs `pattern`, `function`, `op` or `within`",
        ),
        ("name = \"x\"\npattern = 'a'\nfunction = 'b'\n", "not both"),
        ("name = \"Bad Name\"\npattern = 'a'\n", "lower-case letters"),
        (
            "name = \"x\"\npatern = 'a'\n",
            "line 3: unknown field `patern`",
        ),
    ] {
        let text = format!("[[subcategory]]\n{body}");
        let err = Subclassifier::new(Some((&text, "my.toml")))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("my.toml: ") && err.contains(says), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }
}

#[test]
fn classification_md_lists_every_subcategory_row() {
    let (doc, table) = crate::golden_categories::doc_and_table();
    let rows = table["subcategory"].as_array().unwrap();
    assert!(rows.len() >= SUBCATEGORIES.len() - 1);
    for (i, r) in rows.iter().enumerate() {
        let name = r["name"].as_str().unwrap();
        assert!(r.get("why").is_some(), "row {} ({name}) has no why", i + 1);
        for key in ["pattern", "function", "op", "within"] {
            if let Some(p) = r.get(key).and_then(|p| p.as_str()) {
                assert!(
                    doc.contains(&format!("`{p}`")),
                    "docs/CLASSIFICATION.md lacks {key} `{p}` of row {}",
                    i + 1
                );
            }
        }
    }
}
