//! The layers of the crate, checked from the source: a lower layer never
//! names a higher one, the module graph has no cycle, and the generic
//! layers (job, sim, output) name no family.
//!
//! Layers, bottom up (README "Layout"): math, rng, linalg, env, graph,
//! privacy, backend | algo | job | output | sim | cli. The first group are
//! the lower layers of DESIGN.md: mechanisms, environments and backends,
//! which must never reach the algorithms, the job files, the results or the
//! simulation. A reference is any `crate::<module>` (or a member of a
//! `crate::{...}` group) in a file's non-test code (everything before its
//! `#[cfg(test)]` module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LOWER: &[&str] = &["math", "rng", "linalg", "env", "graph", "privacy", "backend"];
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

/// The generic layers (job, sim, output) know no family: their non-test,
/// non-comment code quotes no family, algorithm or environment name of the
/// registry (as a special case would: `== "non_federated"`) and names no
/// family's types or functions (README, "Adding a family").
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
    for layer in ["job", "sim", "output"] {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
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
