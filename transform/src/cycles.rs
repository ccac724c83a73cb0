//! Keeps the crates' module graphs acyclic (docs/ARCHITECTURE.md): a module that imports one
//! that imports it back is two modules that cannot be read, tested or moved apart.
//!
//! The graph is read from the source text: an edge from top-level module `a` to `b` for every
//! `crate::b` path in `a`'s files outside their `#[cfg(test)]` part (tests may reach anywhere).
//! A test module in a file of its own (`#[cfg(test)] mod tests;`) is that part too: its file,
//! and any below it, is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level module a file under `src` belongs to (`lib`/`main` are the roots: no edges).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// Module names after `crate::` in `text`, including each name of a `crate::{a, b::c}` group.
fn uses(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(body.split(',').map(|p| ident(p.trim())));
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m.starts_with(|c: char| c.is_ascii_lowercase()));
    out
}

/// The files of the test modules `file` declares as `#[cfg(test)] mod name;`: `name.rs` or
/// `name/mod.rs` in the folder of `file`'s children (its own for `mod.rs`, `lib.rs` and
/// `main.rs`; else the folder named after it).
fn test_files(file: &Path, text: &str) -> Vec<PathBuf> {
    let stem = file.file_stem().unwrap_or_default();
    let dir = match stem.to_str() {
        Some("mod" | "lib" | "main") => file.parent().unwrap_or(file).to_path_buf(),
        _ => file.with_extension(""),
    };
    text.split("#[cfg(test)]")
        .skip(1)
        .filter_map(|after| {
            let decl = after.trim_start().strip_prefix("mod ")?;
            let name = decl.split(';').next()?.trim();
            let ok =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            ok.then(|| dir.join(name))
        })
        .flat_map(|m| [m.with_extension("rs"), m])
        .collect()
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                files.push((p, text));
            }
        }
    }
    let tests: Vec<PathBuf> = files.iter().flat_map(|(p, t)| test_files(p, t)).collect();
    let mut g = Graph::new();
    for (p, text) in &files {
        let Some(m) = module_of(src, p).filter(|_| !tests.iter().any(|t| p.starts_with(t))) else {
            continue;
        };
        let body = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = g.entry(m.clone()).or_default();
        deps.extend(uses(body).into_iter().filter(|d| *d != m));
    }
    g
}

/// One cycle of `g` (as a path that ends where it starts), if it has any.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(g: &Graph, m: &str, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> bool {
        if let Some(i) = path.iter().position(|p| p == m) {
            path.drain(..i);
            path.push(m.to_string());
            return true;
        }
        if done.contains(m) {
            return false;
        }
        path.push(m.to_string());
        for d in g
            .get(m)
            .into_iter()
            .flatten()
            .filter(|d| g.contains_key(*d))
        {
            if visit(g, d, path, done) {
                return true;
            }
        }
        path.pop();
        done.insert(m.to_string());
        false
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|m| {
        let mut path = vec![];
        visit(g, m, &mut path, &mut done).then_some(path)
    })
}

#[test]
fn the_cycle_finder_finds_a_planted_cycle() {
    let mut g = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into()).or_default().insert(b.into());
        g.entry(b.into()).or_default();
    };
    edge(&mut g, "dataset", "source");
    edge(&mut g, "kineto", "dataset");
    assert_eq!(cycle(&g), None);
    edge(&mut g, "dataset", "kineto");
    assert_eq!(cycle(&g).unwrap(), ["dataset", "kineto", "dataset"]);
    assert_eq!(
        uses("use crate::{a, b::c};\nfn f() { crate::d::e(); }"),
        ["a", "b", "d"].map(String::from).into()
    );
    let text = "mod a;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod b {}\n";
    let p = |s: &str| PathBuf::from(s);
    assert_eq!(
        test_files(&p("src/x/mod.rs"), text),
        [p("src/x/tests.rs"), p("src/x/tests")]
    );
    assert_eq!(
        test_files(&p("src/x/y.rs"), text),
        [p("src/x/y/tests.rs"), p("src/x/y/tests")]
    );
}

#[test]
fn ingest_and_transform_have_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in [root.join("../ingest/src"), root.join("src")] {
        let g = graph(&src);
        assert!(g.len() > 10, "{} modules in {}", g.len(), src.display());
        assert_eq!(cycle(&g), None, "an import cycle in {}", src.display());
    }
}
