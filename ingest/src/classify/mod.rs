//! Kernel taxonomy: a rule table (ingest/rules/default.toml, extendable with `--rules`)
//! compiled into one `RegexSet` per question, so every name is matched once and the rules
//! stay data a reviewer can read, not `if`s scattered through the parsers. The table's
//! `[[subcategory]]` rows, the second level of `other_compute`, are compiled by
//! the `subcategory` module and applied by transform.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};

use serde::Deserialize;

use sets::{Deferred, Sets};

mod sets;

/// The shipped rule table.
pub const DEFAULT_RULES: &str = include_str!("../../rules/default.toml");

/// What a GPU activity is, from its trace category (the `kind` column of `gpu_activities`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A kernel (`kernel`).
    Kernel,
    /// A copy (`gpu_memcpy`).
    Memcpy,
    /// A memory set (`gpu_memset`).
    Memset,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::Kernel, Kind::Memcpy, Kind::Memset];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Memcpy => "memcpy",
            Kind::Memset => "memset",
        }
    }
}

/// What a GPU activity does, as the rule table decides it (the `category` column of
/// `gpu_activities`, docs/CLASSIFICATION.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Communication: NCCL/RCCL and the other collective libraries' kernels, peer-to-peer copies.
    Comm,
    /// Matrix multiplies (cuBLAS, hipBLASLt, CUTLASS, CK GEMMs) and GEMVs.
    Gemm,
    /// Attention kernels (FlashAttention, fused MHA, SDPA).
    Attention,
    /// Copies, and the copy kernels ROCm reports as kernels.
    Memcpy,
    /// Memory sets, and the fill kernels ROCm reports as kernels.
    Memset,
    /// Every other kernel (convolutions, elementwise, reductions, …): split further by the
    /// `subcategory` rules.
    OtherCompute,
}

impl Category {
    pub(crate) const ALL: [Category; 6] = [
        Category::Comm,
        Category::Gemm,
        Category::Attention,
        Category::Memcpy,
        Category::Memset,
        Category::OtherCompute,
    ];

    /// The `category` value (`other_compute` for `OtherCompute`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Category::Comm => "comm",
            Category::Gemm => "gemm",
            Category::Attention => "attention",
            Category::Memcpy => "memcpy",
            Category::Memset => "memset",
            Category::OtherCompute => "other_compute",
        }
    }

    /// The category a `category` value names; `None` for any other text.
    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// A name's category, and its collective kind when it is communication.
pub(crate) type Class = (Category, Option<&'static str>);

/// The collective kinds (`comm_op`), in the order of docs/METRICS.md; `other` last, for comm
/// kernels whose kind neither the trace nor the name tells.
pub const COMM_OPS: [&str; 8] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
    "broadcast",
    "reduce",
    "other",
];

/// Why a rule table (the shipped one or `--rules`) could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Bad TOML, an unknown field or kind, or a regex that does not compile.
    #[error("{path}: {msg}")]
    Invalid {
        /// The rule file (`ingest/rules/default.toml` for the shipped one).
        path: String,
        /// What is wrong, with the line where TOML gives one.
        msg: String,
    },
    /// The `--rules` file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

#[derive(Deserialize)]
struct RuleFile {
    version: Option<String>,
    #[serde(default)]
    rule: Vec<RuleRow>,
    #[serde(default)]
    comm_op: Vec<OpRow>,
    #[serde(default)]
    collective: Vec<OpRow>,
}

#[derive(Deserialize)]
struct RuleRow {
    kind: String,
    /// A regex matched anywhere in the name.
    pattern: Option<String>,
    /// A regex matched at the start of the function name (see `FUNCTION_PREFIX`).
    function: Option<String>,
    category: String,
    #[allow(dead_code)]
    why: Option<String>,
}

/// What may stand before a kernel's function name in a demangled signature: return-type
/// words (`void `, `std::enable_if<true, void>::type `) and namespaces, anonymous ones
/// included. Neither `(` (a parameter list) nor an unclosed `<` (a template argument) is
/// crossed, so a `function` rule never matches a name that only appears as a type inside
/// another kernel's signature.
const FUNCTION_PREFIX: &str =
    r"^(?:[\w:]+(?:<[^()<>]*>)?(?:::\w+)*[*&]* )*(?:(?:\w+|\(anonymous namespace\))::)*";

#[derive(Deserialize)]
struct OpRow {
    pattern: String,
    op: String,
}

/// What a rule applies to.
#[derive(Debug, Clone, Copy)]
enum KindFilter {
    Any,
    Only(Kind),
}

/// The compiled rule table, with a cache of names already seen.
pub struct Classifier {
    version: String,
    /// The `--rules` file's text, kept in `runs.user_rules` for its `[[subcategory]]` rows.
    user_text: Option<String>,
    /// The compiled patterns: of `rules`, `ops` and `colls`, in their order.
    sets: Arc<Deferred>,
    rules: Vec<(KindFilter, Category)>,
    ops: Vec<&'static str>,
    colls: Vec<&'static str>,
    /// Names already classified, one map per `Kind` (looked up by `&str`, no allocation).
    cache: [Mutex<HashMap<String, Class>>; 3],
}

/// A clone shares the compiled sets and starts with an empty name cache.
impl Clone for Classifier {
    fn clone(&self) -> Classifier {
        Classifier {
            version: self.version.clone(),
            user_text: self.user_text.clone(),
            sets: self.sets.clone(),
            rules: self.rules.clone(),
            ops: self.ops.clone(),
            colls: self.colls.clone(),
            cache: Default::default(),
        }
    }
}

impl Classifier {
    /// The shipped table only: compiled once per process and cloned (the compiled sets are
    /// shared, each clone gets an empty name cache), on a thread of its own from the first
    /// call (`sets`). Compiling it is most of a small ingest's start-up, and the tests and
    /// `aorta run` ingest many times in one process.
    pub fn builtin() -> Classifier {
        static BUILTIN: LazyLock<Classifier> = LazyLock::new(|| {
            Classifier::compile_with(None).expect("the shipped rule table is valid")
        });
        BUILTIN.clone()
    }

    /// The shipped table, with the user's rules (tried first) when given.
    pub(crate) fn with_user_rules(user: Option<&Path>) -> Result<Classifier, RulesError> {
        match user {
            None => Ok(Classifier::builtin()),
            Some(_) => Classifier::compile_with(user),
        }
    }

    /// The shipped table, with the user's rules first when given. The shipped table alone
    /// compiles on a thread of its own (`sets`); with a user's file, at once, so that an
    /// error in its patterns is reported here.
    fn compile_with(user: Option<&Path>) -> Result<Classifier, RulesError> {
        let base = parse_file(DEFAULT_RULES, "ingest/rules/default.toml")?;
        let mut version = base.version.clone().unwrap_or_else(|| "0".into());
        let mut files = vec![("ingest/rules/default.toml".to_string(), base)];
        if let Some(p) = user {
            let path = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|source| RulesError::Io {
                path: path.clone(),
                source,
            })?;
            let user = parse_file(&text, &path)?;
            files.insert(0, (path, user));
            version.push_str(&user_version(&text));
            let mut c = compile(files, version, false)?;
            c.user_text = Some(text);
            return Ok(c);
        }
        compile(files, version, true)
    }

    /// The `--rules` file's text, when one was given.
    pub(crate) fn user_rules(&self) -> Option<&str> {
        self.user_text.as_deref()
    }

    /// The rules of one file alone, without the shipped table (for the fuzzer, which would
    /// otherwise spend every run compiling the shipped table).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn from_rules_text(text: &str, path: &str) -> Result<Classifier, RulesError> {
        compile(
            vec![(path.to_string(), parse_file(text, path)?)],
            "0".into(),
            false,
        )
    }

    /// `rules_version`: the shipped table's version, plus `+user.` and a hash of the user's
    /// rules file when there is one, so that editing the file re-reads the inputs on the next
    /// ingest (the manifest compares versions).
    pub(crate) fn version(&self) -> &str {
        &self.version
    }

    /// Category, and collective kind from the name for comm activities.
    pub fn classify(&self, kind: Kind, name: &str) -> Class {
        let cache = &self.cache[kind as usize];
        if let Some(hit) = cache.lock().expect("cache not poisoned").get(name) {
            return *hit;
        }
        let hit = self.classify_uncached(kind, name);
        cache
            .lock()
            .expect("cache not poisoned")
            .insert(name.to_string(), hit);
        hit
    }

    fn classify_uncached(&self, kind: Kind, name: &str) -> Class {
        let category = self
            .sets
            .get()
            .rule
            .matches(name)
            .iter()
            .map(|i| self.rules[i])
            .find(|(f, _)| match f {
                KindFilter::Any => true,
                KindFilter::Only(k) => *k == kind,
            })
            .map(|(_, c)| c)
            .unwrap_or(match kind {
                Kind::Kernel => Category::OtherCompute,
                Kind::Memcpy => Category::Memcpy,
                Kind::Memset => Category::Memset,
            });
        let op = (category == Category::Comm).then(|| {
            self.sets
                .get()
                .op
                .matches(name)
                .iter()
                .next()
                .map_or("other", |i| self.ops[i])
        });
        (category, op)
    }

    /// Collective kind from a `Collective name` arg, when it names one.
    pub fn collective_op(&self, collective_name: &str) -> Option<&'static str> {
        self.sets
            .get()
            .coll
            .matches(collective_name)
            .iter()
            .next()
            .map(|i| self.colls[i])
    }
}

/// `+user.` and the first 16 hex digits of the xxh3-128 of the user's rules text.
fn user_version(text: &str) -> String {
    let h = xxhash_rust::xxh3::xxh3_128(text.as_bytes());
    format!("+user.{:016x}", (h >> 64) as u64)
}

fn parse_file(text: &str, path: &str) -> Result<RuleFile, RulesError> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        let at = line.map(|l| format!("line {l}: ")).unwrap_or_default();
        invalid(path, format!("{at}{}", e.message().trim()))
    })
}

pub(crate) fn invalid(path: &str, msg: String) -> RulesError {
    RulesError::Invalid {
        path: path.into(),
        msg,
    }
}

/// A `function` regex as the pattern it stands for: anchored at the function name.
pub(crate) fn function_pattern(path: &str, f: String) -> Result<String, RulesError> {
    Ok(format!("{FUNCTION_PREFIX}(?:{})", pattern(path, f)?))
}

/// Checks one pattern's syntax on its own, so an error names the file and the pattern on one
/// line. Parsing only: the patterns are compiled once, together, into a `RegexSet` (compiling
/// each alone as well doubled the classifier's start-up, every ingest, for the same answer).
pub(crate) fn pattern(path: &str, p: String) -> Result<String, RulesError> {
    match regex_syntax::Parser::new().parse(&p) {
        Ok(_) => Ok(p),
        Err(e) => {
            let why = e.to_string();
            let why = why
                .lines()
                .last()
                .unwrap_or("")
                .trim_start_matches("error: ");
            Err(invalid(path, format!("pattern `{p}`: {why}")))
        }
    }
}

/// The table of `files`; `defer`: its sets compiled on a thread of their own (`sets`), for
/// the shipped table only (a user's file reports an error in its patterns here, at once).
fn compile(
    files: Vec<(String, RuleFile)>,
    version: String,
    defer: bool,
) -> Result<Classifier, RulesError> {
    let mut patterns = Vec::new();
    let mut rules = Vec::new();
    let (mut op_pats, mut ops, mut coll_pats, mut colls) = (vec![], vec![], vec![], vec![]);
    for (path, f) in files {
        let invalid = |msg| invalid(&path, msg);
        for r in f.rule {
            let filter = match r.kind.as_str() {
                "any" => KindFilter::Any,
                "kernel" => KindFilter::Only(Kind::Kernel),
                "memcpy" => KindFilter::Only(Kind::Memcpy),
                "memset" => KindFilter::Only(Kind::Memset),
                k => return Err(invalid(format!("unknown rule kind `{k}`"))),
            };
            let cat = Category::parse(&r.category)
                .ok_or_else(|| invalid(format!("unknown category `{}`", r.category)))?;
            let p = match (r.pattern, r.function) {
                (Some(p), None) => p,
                (None, Some(f)) => function_pattern(&path, f)?,
                _ => {
                    return Err(invalid(
                        "a [[rule]] has either `pattern` or `function`".to_string(),
                    ))
                }
            };
            patterns.push(pattern(&path, p)?);
            rules.push((filter, cat));
        }
        for (rows, pats, out) in [
            (f.comm_op, &mut op_pats, &mut ops),
            (f.collective, &mut coll_pats, &mut colls),
        ] {
            for o in rows {
                let op = COMM_OPS
                    .iter()
                    .find(|k| **k == o.op)
                    .ok_or_else(|| invalid(format!("unknown collective kind `{}`", o.op)))?;
                pats.push(pattern(&path, o.pattern)?);
                out.push(*op);
            }
        }
    }
    let sets = if defer {
        Deferred::start([patterns, op_pats, coll_pats])
    } else {
        let sets = Sets::compile(&patterns, &op_pats, &coll_pats);
        Deferred::ready(sets.map_err(|e| invalid("rules", e.to_string()))?)
    };
    Ok(Classifier {
        version,
        user_text: None,
        sets: Arc::new(sets),
        rules,
        ops,
        colls,
        cache: Default::default(),
    })
}

#[cfg(test)]
mod tests;
