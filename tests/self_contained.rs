//! A fresh clone, with nothing beside it, is enough: no script, test, doc
//! or config in the repository reaches outside it for something it needs
//! (the developers' `../shared` directory above all: without it, README's
//! test command would exit 127).

use std::path::{Path, PathBuf};

/// What pointing outside the repository looks like.
const OUTSIDE: [&str; 3] = ["../shared", "shared/peers", "/work/"];

/// Every file of the repository, build output and VCS data left out.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if name == ".git" {
            continue; // a directory, or in a worktree a file naming one
        }
        if entry.file_type().unwrap().is_dir() {
            if name != "target" && !name.starts_with("target-") {
                files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn nothing_reaches_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    let mut bad = Vec::new();
    for path in &all {
        // Text only (the screenshot is not); this file names the patterns.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if path.ends_with("tests/self_contained.rs") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if OUTSIDE.iter().any(|p| line.contains(p)) {
                bad.push(format!("{}:{}: {line}", path.display(), n + 1));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "files that need something outside the repository:\n{}",
        bad.join("\n")
    );
    // The installer the test command uses is in the repository.
    let test_sh = std::fs::read_to_string(root.join("scripts/test.sh")).unwrap();
    assert!(test_sh.contains("scripts/install-postfix.sh"), "{test_sh}");
    assert!(root.join("scripts/install-postfix.sh").is_file());
}
