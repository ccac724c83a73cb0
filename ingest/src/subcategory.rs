//! The second level of the kernel taxonomy: what an `other_compute` kernel does
//! (elementwise, normalization, reduction, softmax, optimizer, embedding, convolution,
//! copy_kernel, fused, or `other`), from the `[[subcategory]]` rows of the rule table.
//!
//! Why rows can look at the launching operator: most of `other_compute` is PyTorch's generic
//! kernels (`vectorized_elementwise_kernel`, `reduce_kernel`, `multi_tensor_apply_kernel`),
//! whose names say how they loop, not what for. The operator that launched one says it:
//! `aten::native_layer_norm` (normalization), `aten::_foreach_mul_` (optimizer),
//! `aten::embedding_dense_backward` (embedding), and an annotation around it,
//! `Optimizer.step#AdamW.step`, says it for an optimizer written as a loop of `aten::add_`.
//!
//! Why the rows live here but are applied by `aorta-transform`, not at ingest: the launching
//! operator of a kernel is known only once the whole trace is read (Kineto writes kernels
//! before their launches), and each of ingest's readers would have to carry the operators'
//! names to its sink; transform already links every activity to its operator
//! (`transform::launch`) for every format. So ingest checks the rows (`pipeline`: a bad
//! regex in `--rules` fails the ingest that names the file) and keeps the user's rules text in
//! `runs.user_rules`; transform compiles the shipped rows plus that text and classifies each
//! distinct (name, operator, enclosing annotations) once.

use std::collections::HashMap;

use regex::RegexSet;
use serde::Deserialize;

use crate::classify::{self, RulesError, DEFAULT_RULES};

/// The shipped subcategories, in the order reports list them; `other` is every
/// `other_compute` kernel no row claims. User rules may add names of their own.
pub const SUBCATEGORIES: [&str; 10] = [
    "elementwise",
    "normalization",
    "reduction",
    "softmax",
    "optimizer",
    "embedding",
    "convolution",
    "copy_kernel",
    "fused",
    "other",
];

/// What an `other_compute` kernel no row claims is.
pub(crate) const OTHER: &str = "other";

/// At most this many rows may have a `within` condition (their matches are a bit mask).
pub(crate) const MAX_WITHIN: usize = 64;

/// One `[[subcategory]]` row as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubRow {
    /// The subcategory a matching kernel gets.
    name: String,
    /// A regex matched anywhere in the kernel name.
    pattern: Option<String>,
    /// A regex matched at the start of the kernel's function name (as `[[rule]]`'s).
    function: Option<String>,
    /// A regex matched anywhere in the launching operator's name.
    op: Option<String>,
    /// A regex matched against the operators and annotations enclosing the launching
    /// operator on its thread.
    within: Option<String>,
    #[allow(dead_code)]
    why: Option<String>,
}

#[derive(Deserialize)]
struct SubFile {
    #[serde(default)]
    subcategory: Vec<SubRow>,
}

/// The compiled `[[subcategory]]` rows: user rows first, then the shipped ones.
#[derive(Debug)]
pub struct Subclassifier {
    /// Each row's subcategory.
    names: Vec<String>,
    /// One pattern per row: its kernel-name regex, or an empty one (matches every name).
    kernel_set: RegexSet,
    /// One pattern per row with an `op`: (row, regex index in `op_set`).
    op_rows: HashMap<usize, usize>,
    op_set: RegexSet,
    /// Rows with a `within`, in `within_set`'s order (bit i of a mask is pattern i).
    within_rows: Vec<usize>,
    within_set: RegexSet,
}

impl Subclassifier {
    /// The shipped rows alone.
    pub fn builtin() -> Subclassifier {
        Subclassifier::new(None).expect("the shipped subcategory rows compile")
    }

    /// The shipped rows, after the `[[subcategory]]` rows of the user's rules text (the
    /// `--rules` file given to ingest, kept in `runs.user_rules`) when there is one.
    pub fn new(user: Option<(&str, &str)>) -> Result<Subclassifier, RulesError> {
        let mut rows = Vec::new();
        if let Some((text, path)) = user {
            rows.push((path.to_string(), parse(text, path)?));
        }
        let shipped = "ingest/rules/default.toml";
        rows.push((shipped.to_string(), parse(DEFAULT_RULES, shipped)?));
        compile(rows)
    }

    /// Every subcategory a row of this table can give, shipped ones first, then the user's
    /// in the order they first appear.
    pub fn names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = SUBCATEGORIES.to_vec();
        for n in &self.names {
            if !out.contains(&n.as_str()) {
                out.push(n);
            }
        }
        out
    }

    /// The `within` regexes' set: bit i of a mask given to `classify` says that an operator
    /// or annotation matching pattern i encloses the launching operator.
    pub fn within_set(&self) -> &RegexSet {
        &self.within_set
    }

    /// The subcategory of an `other_compute` kernel `name`, launched by the operator `op`
    /// (none when no operator is known) inside the annotations of `within` (a mask over
    /// `within_set`): the first row whose every condition holds, else `other`.
    pub fn classify(&self, name: &str, op: Option<&str>, within: u64) -> &str {
        let ops: Vec<usize> =
            op.map_or(Vec::new(), |o| self.op_set.matches(o).into_iter().collect());
        self.kernel_set
            .matches(name)
            .into_iter()
            .find(|&row| {
                let op_ok = self.op_rows.get(&row).is_none_or(|i| ops.contains(i));
                let within_ok = match self.within_rows.iter().position(|&r| r == row) {
                    Some(bit) => within & (1 << bit) != 0,
                    None => true,
                };
                op_ok && within_ok
            })
            .map_or(OTHER, |row| &self.names[row])
    }
}

fn parse(text: &str, path: &str) -> Result<Vec<SubRow>, RulesError> {
    let f: SubFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        let at = line.map(|l| format!("line {l}: ")).unwrap_or_default();
        classify::invalid(path, format!("{at}{}", e.message().trim()))
    })?;
    Ok(f.subcategory)
}

/// A subcategory name: lower-case words, so it is a column value and a CLI word alike.
fn valid_name(n: &str) -> bool {
    n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn compile(files: Vec<(String, Vec<SubRow>)>) -> Result<Subclassifier, RulesError> {
    let (mut names, mut kernels, mut ops, mut withins) = (vec![], vec![], vec![], vec![]);
    let (mut op_rows, mut within_rows) = (HashMap::new(), vec![]);
    for (path, rows) in files {
        let invalid = |msg: String| classify::invalid(&path, msg);
        for r in rows {
            let row = names.len();
            if !valid_name(&r.name) {
                return Err(invalid(format!(
                    "subcategory name `{}`: lower-case letters, digits and _",
                    r.name
                )));
            }
            let kernel = match (r.pattern, r.function) {
                (Some(p), None) => classify::pattern(&path, p)?,
                (None, Some(f)) => classify::function_pattern(&path, f)?,
                (None, None) => String::new(),
                _ => {
                    return Err(invalid(format!(
                        "subcategory `{}`: a row has `pattern` or `function`, not both",
                        r.name
                    )))
                }
            };
            if kernel.is_empty() && r.op.is_none() && r.within.is_none() {
                return Err(invalid(format!(
                    "subcategory `{}`: a row needs `pattern`, `function`, `op` or `within`",
                    r.name
                )));
            }
            kernels.push(kernel);
            if let Some(o) = r.op {
                op_rows.insert(row, ops.len());
                ops.push(classify::pattern(&path, o)?);
            }
            if let Some(w) = r.within {
                if withins.len() == MAX_WITHIN {
                    return Err(invalid(format!("more than {MAX_WITHIN} `within` rows")));
                }
                within_rows.push(row);
                withins.push(classify::pattern(&path, w)?);
            }
            names.push(r.name);
        }
    }
    let set = |p: Vec<String>| {
        RegexSet::new(p).map_err(|e| classify::invalid("subcategory rules", e.to_string()))
    };
    Ok(Subclassifier {
        names,
        kernel_set: set(kernels)?,
        op_rows,
        op_set: set(ops)?,
        within_rows,
        within_set: set(withins)?,
    })
}
