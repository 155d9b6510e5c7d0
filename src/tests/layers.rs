//! The layers of the crate, checked from the source: a lower layer never
//! names a higher one, the module graph has no cycle, and the generic
//! layers (job, sim, output, cli, the shared round loop, the auditor) name
//! no family.
//!
//! Layers, bottom up (README, "Layout and documents"): math, cache, named, rng, linalg, env, graph,
//! privacy, backend | algo | job | output | sim | cli. The first group are
//! the lower layers: mechanisms, environments and backends,
//! which must never reach the algorithms, the job files, the results or the
//! simulation. A reference is any `crate::<module>` (or a member of a
//! `crate::{...}` group) in a file's non-test code (everything before its
//! `#[cfg(test)]` module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LOWER: &[&str] = &[
    "math", "cache", "input", "named", "rng", "linalg", "env", "graph", "privacy", "backend",
];
const HIGHER: &[&str] = &["algo", "job", "output", "sim", "cli"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap_or_else(|e| panic!("{e}")).path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules named right after a `crate::`: one name
/// (`crate::algo::...`), or each group member of `crate::{algo, job::Job}`.
fn named_modules(after: &str) -> Vec<String> {
    let ident = |t: &str| -> String {
        t.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    match after.strip_prefix('{') {
        Some(group) => {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            // Nested groups: only names at depth 0 are top-level modules.
            let (mut depth, mut names, mut start) = (0, Vec::new(), 0);
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.push(ident(group[start..j].trim_start()));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            names.push(ident(group[start..].trim_start()));
            names.into_iter().filter(|n| !n.is_empty()).collect()
        }
        None => vec![ident(after)].into_iter().filter(|n| !n.is_empty()).collect(),
    }
}

#[test]
fn grouped_crate_imports_are_seen() {
    assert_eq!(named_modules("algo::CellConfig;"), ["algo"]);
    assert_eq!(
        named_modules("{algo::X, job, output::{a, b}};"),
        ["algo", "job", "output"]
    );
}

/// module -> modules its non-test code names, with one file as evidence.
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap_or(&f);
        let first = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let module = first.unwrap_or_default().trim_end_matches(".rs").to_string();
        if ["lib", "main", "build"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let entry = graph.entry(module.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            for name in named_modules(&code[i + 7..]) {
                if name != module {
                    entry.entry(name).or_insert_with(|| rel.display().to_string());
                }
            }
        }
    }
    graph
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let graph = module_graph();
    let mut bad = Vec::new();
    for low in LOWER {
        for (to, file) in graph.get(*low).into_iter().flatten() {
            if HIGHER.contains(&to.as_str()) {
                bad.push(format!("{file}: {low} -> {to}"));
            }
        }
    }
    assert!(bad.is_empty(), "lower layers reach up:\n{}", bad.join("\n"));
    // The checker sees what it must: the algorithms do use the backend.
    assert!(graph["algo"].contains_key("backend"));
}

#[test]
fn module_graph_has_no_cycle() {
    let graph = module_graph();
    // Depth-first search for a back edge.
    fn visit<'a>(
        n: &'a str,
        g: &'a BTreeMap<String, BTreeMap<String, String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let start = path.iter().position(|p| *p == n).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(n, 1);
        path.push(n);
        for to in g.get(n).into_iter().flat_map(|m| m.keys()) {
            if g.contains_key(to.as_str())
                && let Some(c) = visit(to, g, state, path)
            {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    let names: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    for n in names {
        if let Some(c) = visit(n, &graph, &mut state, &mut Vec::new()) {
            panic!("import cycle: {}", c.join(" -> "));
        }
    }
}

/// The generic layers (job, sim, output, cli) and the shared round loop
/// (`algo/rounds.rs`) and the auditor (`algo/audit.rs`) know no family: their non-test,
/// non-comment code quotes no family, algorithm or environment name of the
/// registry (as a special case would: `== "non_federated"`) and names no
/// family's types or functions (`src/algo/README.md`).
#[test]
fn generic_layers_name_no_family() {
    use fedbandits::algo::family::FAMILIES;
    let mut quoted: Vec<String> = Vec::new();
    for f in FAMILIES {
        quoted.push(format!("\"{}\"", f.name));
        quoted.extend(
            f.algorithms
                .iter()
                .chain(f.environments)
                .map(|(n, _)| format!("\"{n}\"")),
        );
    }
    // The families' type and module prefixes (LinearBatch, GossipPoint,
    // CombConfig, gossip::, combinatorial::, linear::).
    let prefixes = ["Linear", "Gossip", "Comb", "gossip::", "combinatorial::", "linear::"];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    // The generic layers, and the generic files of the algorithms' layer
    // (the shared round loop, the auditor).
    for layer in ["job", "sim", "output", "cli", "algo/rounds.rs", "algo/audit.rs"] {
        let mut files = Vec::new();
        let at = src.join(layer);
        if at.is_file() {
            files.push(at);
        } else {
            rust_files(&at, &mut files);
        }
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (n, line) in code.lines().enumerate() {
                let line = line.split("//").next().unwrap_or("");
                let word_start = |i: usize| !line[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
                let quotes = quoted.iter().any(|q| line.contains(q.as_str()));
                let names = prefixes
                    .iter()
                    .any(|p| line.match_indices(*p).any(|(i, _)| word_start(i)));
                if quotes || names {
                    bad.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "generic layers name a family:\n{}", bad.join("\n"));
}

/// A file's module path under `src` (`algo/linear/mod.rs` -> [algo, linear]).
fn module_path(src: &Path, f: &Path) -> Vec<String> {
    let rel = f.strip_prefix(src).unwrap_or(f).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The identifiers of a path text (`a::b::{c, d}` -> [a, b]; a group ends
/// the path).
fn path_segments(after: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = after;
    loop {
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() {
            return out;
        }
        rest = &rest[ident.len()..];
        out.push(ident);
        match rest.strip_prefix("::") {
            Some(r) if !r.starts_with('{') => rest = r,
            _ => return out,
        }
    }
}

/// file module -> the file modules of its own top-level layer its
/// non-test code names through `crate::`, `super::` or `self::` paths (and
/// their `{...}` groups), each resolved to the longest prefix that is a
/// file. A parent naming its own child by a bare path (`mod x; use x::Y`)
/// is structure, not an edge.
fn file_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .into_iter()
        .map(|f| (module_path(src, &f), f))
        .filter(|(m, _)| !m.is_empty() && !["lib", "main", "build"].contains(&m[0].as_str()))
        .collect();
    let longest = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|k| path[..k].to_vec())
            .find(|p| modules.contains_key(p))
    };
    let mut graph = BTreeMap::new();
    for (module, f) in &modules {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut deps = BTreeSet::new();
        for anchor in ["crate::", "super::", "self::"] {
            for (i, _) in code.match_indices(anchor) {
                if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut base: Vec<String> = match anchor {
                    "crate::" => Vec::new(),
                    "super::" => module[..module.len() - 1].to_vec(),
                    _ => module.clone(),
                };
                let mut after = &code[i + anchor.len()..];
                while let Some(r) = after.strip_prefix("super::") {
                    base.pop();
                    after = r;
                }
                let mut targets = Vec::new();
                let head = path_segments(after);
                let mut prefix = base.clone();
                prefix.extend(head.iter().cloned());
                targets.push(prefix.clone());
                // A group after the path: each member from the prefix.
                let consumed: usize = head.iter().map(|s| s.len() + 2).sum();
                if let Some(group) = after.get(consumed..).and_then(|g| g.strip_prefix('{')) {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for item in group.split(',') {
                        let mut p = prefix.clone();
                        p.extend(path_segments(item.trim_start()));
                        targets.push(p);
                    }
                }
                for t in targets {
                    if let Some(to) = longest(&t)
                        && &to != module
                        && to[0] == module[0]
                    {
                        deps.insert(to);
                    }
                }
            }
        }
        graph.insert(module.clone(), deps);
    }
    graph
}

/// The first cycle of a graph, as its nodes in order (closing the loop).
fn first_cycle(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit<'a>(
        n: &'a Vec<String>,
        g: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<&'a Vec<String>, u8>,
        path: &mut Vec<&'a Vec<String>>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let start = path.iter().position(|p| *p == n).unwrap_or(0);
                let mut c: Vec<String> = path[start..].iter().map(|m| m.join("::")).collect();
                c.push(n.join("::"));
                return Some(c);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(n, 1);
        path.push(n);
        for to in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(to, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    g.keys().find_map(|n| visit(n, g, &mut state, &mut Vec::new()))
}

/// No two files of a layer import each other, directly or around a loop
/// (algo's parameter reader, registry and families did).
#[test]
fn files_within_a_layer_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = file_graph(&src);
    // The checker sees what it must: the families use the reader.
    assert!(
        g[&vec!["algo".to_string(), "linear".into(), "params".into()]]
            .contains(&vec!["algo".to_string(), "resolve".into()])
    );
    if let Some(c) = first_cycle(&g) {
        panic!("import cycle between files: {}", c.join(" -> "));
    }
}

/// The file-level check fails on a planted cycle (two files naming each
/// other through `super::` and a `crate::{...}` group) and passes without.
#[test]
fn a_planted_file_cycle_is_found() {
    let root = std::env::temp_dir().join(format!("fedbandits-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let layer = root.join("algo");
    std::fs::create_dir_all(&layer).unwrap();
    std::fs::write(layer.join("mod.rs"), "pub mod x;\npub mod y;\npub mod z;\n").unwrap();
    std::fs::write(layer.join("x.rs"), "use super::y::T;\npub struct U;\n").unwrap();
    std::fs::write(layer.join("z.rs"), "pub struct V;\n").unwrap();
    std::fs::write(layer.join("y.rs"), "use crate::algo::{z::V};\npub struct T;\n").unwrap();
    assert_eq!(first_cycle(&file_graph(&root)), None);
    std::fs::write(layer.join("y.rs"), "use crate::algo::{z::V, x::U};\npub struct T;\n").unwrap();
    let c = first_cycle(&file_graph(&root)).expect("the planted cycle is found");
    assert!(
        c.contains(&"algo::x".to_string()) && c.contains(&"algo::y".to_string()),
        "{c:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
