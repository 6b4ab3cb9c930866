//! The commands shown in README and the guide (`docs/`) work as written on
//! a fresh machine, and README stays a first page.
//!
//! * The shell snippets that can run unattended (fenced as `sh`) are run,
//!   each in bash from the repository's root, bounded in time.
//! * Every command shown (in `text` and `sh` blocks of README, the guide and
//!   the examples' own docs, and inline in README and the guide) uses a tool
//!   the test command installs (no `nc`, which a fresh machine lacks), names
//!   an example, package, binary or script that exists, and README and the
//!   guide link only to files in the repository.
//! * The echo example's port, as the docs run it, is the one `echo.rs`
//!   listens on.
//! * README fits its budget and shows the dependency line, the relay's
//!   command and the test command on its first screen; BENCHMARKS.md fits
//!   its budget; the documentation names no work sessions and no issue
//!   numbers.

mod util;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A fenced block: its info string, first line number, and lines.
#[derive(Debug)]
struct Block {
    info: String,
    line: usize,
    lines: Vec<String>,
}

/// The lines of `text` that can hold a block: all of a Markdown file's, the
/// `//!` lines of a Rust file (prefix stripped).
fn doc_line(raw: &str, rust: bool) -> Option<&str> {
    if rust {
        let l = raw.trim_start().strip_prefix("//!")?;
        Some(l.strip_prefix(' ').unwrap_or(l))
    } else {
        Some(raw)
    }
}

/// The fenced blocks of `text` (a Rust file's crate docs if `rust`).
fn blocks(text: &str, rust: bool) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (n, raw) in text.lines().enumerate() {
        let Some(line) = doc_line(raw, rust) else {
            open = None;
            continue;
        };
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => {
                    open = Some(Block {
                        info: info.trim().to_owned(),
                        line: n + 1,
                        lines: Vec::new(),
                    })
                }
            }
        } else if let Some(b) = &mut open {
            b.lines.push(t.to_owned());
        }
    }
    out
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The programs a command line shown in the docs may start with, and what
/// provides each on a fresh machine.
const TOOLS: [(&str, &str); 11] = [
    ("cargo", "the Rust toolchain"),
    ("bash", "the base system"),
    ("echo", "the shell"),
    ("touch", "the base system"),
    ("mkdir", "the base system"),
    ("socat", "scripts/test.sh"),
    ("swaks", "scripts/test.sh"),
    ("python3", "scripts/test.sh"),
    ("curl", "scripts/test.sh"),
    ("smtp-sink", "scripts/install-postfix.sh"),
    ("smtp-source", "scripts/install-postfix.sh"),
];

/// Programs a reader might expect that a fresh machine does not have.
const ABSENT: [&str; 3] = ["nc", "netcat", "telnet"];

/// The problems with one command (`cmd` as shown, pipelines split).
fn check_command(
    cmd: &str,
    packages: &[String],
    examples: &[String],
    bins: &[(String, String)],
    problems: &mut Vec<String>,
) {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let Some(&program) = words.first() else {
        return;
    };
    if ABSENT.contains(&program) {
        problems.push(format!("`{cmd}`: {program} is not on a fresh machine"));
        return;
    }
    let Some((_, source)) = TOOLS.iter().find(|(t, _)| *t == program) else {
        return; // output shown beside the commands, not a command
    };
    if source.starts_with("scripts/") && !read(source).contains(program) {
        problems.push(format!("`{cmd}`: {source} does not install {program}"));
    }
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
            .copied()
    };
    if program == "cargo" {
        if let Some(p) = after("-p") {
            if !packages.iter().any(|k| k == p) {
                problems.push(format!("`{cmd}`: no package {p}"));
            }
        }
        if let Some(e) = after("--example") {
            if !examples.iter().any(|k| k == e) {
                problems.push(format!("`{cmd}`: no example {e}"));
            }
        }
        if let Some(b) = after("--bin") {
            // A `[[bin]]` of the package named (the root one by default),
            // or one of the root package's `src/bin`.
            let facade = root_package();
            let package = after("-p").unwrap_or(&facade);
            let declared = bins.iter().any(|(p, n)| p == package && n == b);
            let in_src_bin = package == facade && root().join(format!("src/bin/{b}")).exists();
            if !(declared || in_src_bin) {
                problems.push(format!("`{cmd}`: no binary {b}"));
            }
        }
    }
    if program == "bash" {
        if let Some(script) = words.get(1) {
            if !root().join(script).is_file() {
                problems.push(format!("`{cmd}`: no file {script}"));
            }
        }
    }
}

/// The facade's package name (the root manifest's `[package]`).
fn root_package() -> String {
    names_after(&read("Cargo.toml"), "[package]").remove(0)
}

/// README and the guide's chapters: (path, text).
fn docs() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_owned(), read("README.md"))];
    let mut chapters: Vec<_> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    for path in chapters {
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        out.push((name, std::fs::read_to_string(&path).unwrap()));
    }
    let names: Vec<&String> = out.iter().map(|(n, _)| n).collect();
    assert!(
        names.len() >= 6,
        "README and at least five guide chapters: {names:?}"
    );
    out
}

/// `name = "..."` values that follow `header` lines in a Cargo.toml.
fn names_after(toml: &str, header: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == header;
        } else if inside {
            if let Some(v) = line.strip_prefix("name = ") {
                out.push(v.trim_matches('"').to_owned());
            }
        }
    }
    out
}

#[test]
fn commands_shown_in_the_docs_use_what_a_fresh_machine_has() {
    let members = [
        "",
        "runtime",
        "sync",
        "net",
        "profile",
        "examples",
        "examples/mail-relay",
        "benches",
    ];
    let packages: Vec<String> = members
        .iter()
        .flat_map(|m| {
            names_after(
                &read(format!("{m}/Cargo.toml").trim_start_matches('/')),
                "[package]",
            )
        })
        .collect();
    let examples = names_after(&read("examples/Cargo.toml"), "[[example]]");
    assert!(examples.len() >= 5, "{examples:?}");
    // (package, binary) for every `[[bin]]` of a member.
    let bins: Vec<(String, String)> = members
        .iter()
        .flat_map(|m| {
            let toml = read(format!("{m}/Cargo.toml").trim_start_matches('/'));
            let package = names_after(&toml, "[package]").remove(0);
            names_after(&toml, "[[bin]]")
                .into_iter()
                .map(move |b| (package.clone(), b))
        })
        .collect();
    // The check itself: a declared binary passes, a missing one does not.
    let mut seen = Vec::new();
    check_command(
        "cargo run -p coro-benches --bin echo-ab",
        &packages,
        &examples,
        &bins,
        &mut seen,
    );
    check_command(
        "cargo run -p coro-benches --bin no-such",
        &packages,
        &examples,
        &bins,
        &mut seen,
    );
    assert_eq!(seen.len(), 1, "{seen:?}");

    let mut sources: Vec<(String, String, bool)> =
        docs().into_iter().map(|(n, t)| (n, t, false)).collect();
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = format!("examples/{}", path.file_name().unwrap().to_string_lossy());
            sources.push((name, std::fs::read_to_string(&path).unwrap(), true));
        }
    }
    let mut problems = Vec::new();
    for (name, text, is_rust) in &sources {
        for b in blocks(text, *is_rust) {
            if !(b.info.is_empty() || b.info == "text" || b.info == "sh") {
                continue;
            }
            for line in &b.lines {
                let cmd = line.split(" #").next().unwrap_or("");
                for part in cmd.split(['|', ';']).flat_map(|p| p.split("&&")) {
                    let before = problems.len();
                    check_command(
                        part.trim().trim_end_matches('&'),
                        &packages,
                        &examples,
                        &bins,
                        &mut problems,
                    );
                    for p in &mut problems[before..] {
                        *p = format!("{name}:{}: {p}", b.line);
                    }
                }
            }
        }
    }
    for (name, text) in docs() {
        // Inline commands (README's tables) too.
        for (i, piece) in text.split('`').enumerate() {
            if i % 2 == 1 && piece.starts_with("cargo ") {
                let before = problems.len();
                check_command(piece, &packages, &examples, &bins, &mut problems);
                for p in &mut problems[before..] {
                    *p = format!("{name}: {p}");
                }
            }
        }
        // Links point into the repository, relative to the file.
        let dir = Path::new(&name).parent().unwrap_or(Path::new(""));
        for (i, _) in text.match_indices("](") {
            let target = text[i + 2..].split(')').next().unwrap();
            let target = target.split('#').next().unwrap();
            if target.contains("://") || target.is_empty() {
                continue;
            }
            if !root().join(dir).join(target).exists() {
                problems.push(format!(
                    "{name} links to {target}, which is not in the repository"
                ));
            }
        }
        if text.contains("DESIGN.md") {
            problems.push(format!(
                "{name} refers to DESIGN.md, which is not in the repository"
            ));
        }
    }

    // The echo example's address, as the docs run it and as echo.rs defaults.
    let echo = read("examples/echo.rs");
    let default = echo
        .split("unwrap_or_else(|| \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("echo.rs has a default address");
    let texts = docs();
    let shown: Vec<&str> = texts
        .iter()
        .flat_map(|(_, t)| t.lines())
        .filter_map(|l| l.split("--example echo -- ").nth(1))
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert!(!shown.is_empty(), "the docs no longer run the echo example");
    for addr in shown {
        if addr != default {
            problems.push(format!(
                "the docs run echo on {addr}; echo.rs defaults to {default}"
            ));
        }
    }

    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn unattended_snippets_of_the_docs_run_as_written() {
    let mut seen = Vec::new();
    for (name, text) in docs() {
        for b in blocks(&text, false).into_iter().filter(|b| b.info == "sh") {
            let script = b.lines.join("\n");
            if seen.contains(&script) {
                continue; // the same snippet in README and a chapter runs once
            }
            let mut cmd = Command::new("bash");
            util::child::as_user(&mut cmd)
                .args(["-euo", "pipefail", "-c", &script])
                .current_dir(root());
            // `cargo run` resolves features for one package, not the
            // workspace (mail-relay adds `log/serde`), so it builds the
            // example's chain once more: 90 s on a loaded 2-core machine.
            // The bound only turns a hang into a failure.
            let out = util::child::run(&mut cmd, Duration::from_secs(600));
            assert!(
                out.status.success(),
                "{name}:{}: `{script}` failed ({}):\n{}\n{}",
                b.line,
                out.status,
                out.stdout,
                out.stderr
            );
            seen.push(script);
        }
    }
    assert!(!seen.is_empty(), "README has no unattended (`sh`) snippet");
}

/// README is a first page: within its budget, with the dependency line,
/// the relay's command and the test command on its first screen (50 lines).
#[test]
fn readme_shows_the_first_ten_minutes_on_its_first_screen() {
    let readme = read("README.md");
    assert!(
        readme.len() <= 15_000,
        "README.md is {} bytes; at most 15 000 (the rest belongs in the guide)",
        readme.len()
    );
    let first_screen: String = readme.lines().take(50).collect::<Vec<_>>().join("\n");
    let dependency = format!("{} = ", root_package());
    for needed in [
        dependency.as_str(),
        "cargo run --release -p mail-relay",
        "bash scripts/test.sh",
    ] {
        assert!(
            first_screen.contains(needed),
            "README's first 50 lines do not show `{needed}`"
        );
    }
    let benchmarks = read("BENCHMARKS.md");
    assert!(
        benchmarks.len() <= 40_000,
        "BENCHMARKS.md is {} bytes; at most 40 000 (current figures only)",
        benchmarks.len()
    );
}

/// The documentation speaks of the project, not of how it was made: no
/// issue numbers, no numbered work sessions. (SMTP sessions are fine.)
#[test]
fn the_docs_name_no_issue_numbers_and_no_work_sessions() {
    let ordinals = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
        "tenth", "this", "last", "next", "previous", "earlier",
    ];
    let mut files = docs();
    files.push(("BENCHMARKS.md".to_owned(), read("BENCHMARKS.md")));
    files.push(("CHANGELOG.md".to_owned(), read("CHANGELOG.md")));
    let mut problems = Vec::new();
    for (name, text) in &files {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !(c.is_alphanumeric() || c == '#'))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            let issue_number = pair[0] == "issue"
                && pair[1]
                    .trim_start_matches('#')
                    .chars()
                    .all(|c| c.is_ascii_digit());
            let work_session = ordinals.contains(&pair[0])
                && (pair[1] == "session" || pair[1] == "sessions" || pair[1] == "round");
            if issue_number || work_session {
                problems.push(format!("{name}: \"{} {}\"", pair[0], pair[1]));
            }
        }
        if lower.contains("issue #") {
            problems.push(format!("{name}: names an issue number"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
