//! The doc comments' examples are written as a user of `coro` writes them.

/// No example in a doc comment of coro's crates names the inner crates
/// (`coro_sync::...` cannot be pasted into a crate that depends on `coro`);
/// the doc tests compile them against the real `coro`, a dev-dependency of
/// each.
#[test]
fn doc_examples_use_the_coro_paths_a_user_writes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut files = Vec::new();
    for dir in ["src", "runtime/src", "sync/src", "net/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut in_example = false;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            let Some(doc) = t.strip_prefix("///").or_else(|| t.strip_prefix("//!")) else {
                in_example = false;
                continue;
            };
            if doc.trim_start().starts_with("```") {
                in_example = !in_example;
                continue;
            }
            let inner = ["coro_runtime", "coro_sync", "coro_net"];
            if in_example && inner.iter().any(|c| names_crate(doc, c)) {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "doc examples that name an inner crate instead of `coro::`:\n{}",
        found.join("\n")
    );
}

/// Whether `line` names the crate `krate` (as an identifier, not inside a
/// longer one).
fn names_crate(line: &str, krate: &str) -> bool {
    line.match_indices(krate).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + krate.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
