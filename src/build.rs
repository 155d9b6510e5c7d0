//! Build script: records the git commit the binary is built from (written
//! into every Parquet file's metadata), with `+dirty` appended when the
//! engine's tracked sources (src, kernels, Cargo.toml, Cargo.lock) differ
//! from that commit, so a result computed by uncommitted code does not
//! claim a commit whose code it did not run. Outside a git checkout:
//! "unknown".

use std::process::Command;

/// What the engine is built from: its edits make a build dirty.
const SOURCES: [&str; 4] = ["src", "kernels", "Cargo.toml", "Cargo.lock"];

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
}

fn main() {
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs", ".git/index"]
        .iter()
        .chain(&SOURCES)
    {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = git(&["rev-parse", "HEAD"])
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    if let Some(c) = commit {
        let mut args = vec!["status", "--porcelain", "--untracked-files=no", "--"];
        args.extend(SOURCES);
        let dirty = git(&args).is_some_and(|s| !s.trim().is_empty());
        let suffix = if dirty { "+dirty" } else { "" };
        println!("cargo:rustc-env=FEDBANDITS_GIT_COMMIT={c}{suffix}");
    }
}
