//! The newcomer's test commands stay fast and work in other setups.
//!
//! * `cargo test --workspace` does not build the benches' peers (may,
//!   criterion), while CI still lints the benches.
//! * With `CARGO_TARGET_DIR` pointing elsewhere (IDEs and CI caches set it),
//!   the inner cargo keeps the user's settings (and so finds this very test
//!   binary, fresh) instead of rebuilding the whole workspace into
//!   `./target`; its output is drained as it comes (it would fill a pipe
//!   nobody reads), and its run time is bounded.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The bench-only peers. tokio is not one of them: the async interop
/// tests (tests/hyper.rs, tests/postgres.rs) build hyper and
/// tokio-postgres, which depend on tokio's io traits (no tokio runtime runs
/// in them).
const PEERS: [&str; 2] = ["may", "criterion"];

/// The paths of the test binaries in cargo's `Executable` lines: ``Executable
/// `PATH` `` with `-v`, `Executable NAME (PATH)` without.
fn executables<'a>(log: &'a str, root: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
    log.lines().filter_map(move |l| {
        let rest = l.trim_start().strip_prefix("Executable ")?.trim_end();
        let path = match rest.strip_prefix('`') {
            Some(quoted) => quoted.strip_suffix('`')?,
            None => rest.rsplit_once('(')?.1.strip_suffix(')')?,
        };
        Some(root.join(path))
    })
}

#[test]
fn cargo_test_workspace_does_not_build_the_bench_peers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    util::child::as_user(&mut cmd);
    // The test command's build (scripts/test.sh: every feature on).
    cmd.args([
        "test",
        "--workspace",
        "--all-features",
        "--no-run",
        "--offline",
        "-v",
    ])
    .current_dir(root);
    // Everything is built already (cargo builds every test before running
    // any): the command only checks freshness, in seconds. The bound turns
    // a rebuild of the workspace, or a hang, into a failure.
    let out = util::child::run(&mut cmd, Duration::from_secs(300));
    let log = out.stderr;
    assert!(out.status.success(), "{log}");
    for peer in PEERS {
        let unit = log.lines().any(|l| {
            let l = l.trim_start();
            (l.starts_with("Fresh ") || l.starts_with("Compiling "))
                && l.split_whitespace().nth(1) == Some(peer)
        });
        assert!(!unit, "cargo test --workspace builds {peer}:\n{log}");
    }
    // The same build, not a second one elsewhere: the test binaries it
    // lists are in the directory this test runs from (wherever
    // CARGO_TARGET_DIR put it). (Not this very binary: `cargo test -p coro`
    // unifies features differently from `--workspace`, so its hash differs.)
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap();
    let listed: Vec<PathBuf> = executables(&log, root).collect();
    assert!(!listed.is_empty(), "no test binaries listed:\n{log}");
    for exe in &listed {
        let dir = exe.parent().and_then(|d| d.canonicalize().ok());
        assert_eq!(
            dir.as_deref(),
            Some(deps.as_path()),
            "the inner cargo built {} outside this test's target directory",
            exe.display()
        );
    }
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.contains("cargo clippy --workspace --all-targets"),
        "CI no longer lints the benches"
    );
}

/// The lines `cargo tree` prints for `args` (offline, every package once
/// per path: the sorted, deduplicated set is the crates a build compiles).
fn cargo(args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    util::child::as_user(&mut cmd);
    cmd.args(args).arg("--offline").current_dir(root);
    let out = util::child::run(&mut cmd, Duration::from_secs(120));
    assert!(out.status.success(), "cargo {args:?}: {}", out.stderr);
    out.stdout
}

/// The packages a build of the facade compiles for the target (its normal
/// dependencies, transitively, itself included), with `features`.
fn facade_tree(features: &[&str]) -> Vec<String> {
    let mut args = vec!["tree", "-p", "coro-rt", "-e", "normal"];
    args.extend(["--prefix", "none", "--no-dedupe"]);
    args.extend(features);
    let mut crates: Vec<String> = cargo(&args)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect();
    crates.sort();
    crates.dedup();
    crates
}

/// A program that depends on coro alone compiles a small tree: the
/// resolver, the back door and the async adapters are features.
#[test]
fn the_facade_default_features_compile_at_most_20_crates() {
    let default = facade_tree(&[]);
    assert!(
        default.len() <= 20,
        "{} crates:\n{}",
        default.len(),
        default.join("\n")
    );
    let has = |tree: &[String], name: &str| tree.iter().any(|c| c.starts_with(&format!("{name} ")));
    for heavy in ["hickory-proto", "tokio", "futures-io", "hyper"] {
        assert!(!has(&default, heavy), "{heavy} is built by default");
    }
    assert!(
        has(&default, "signal-hook"),
        "signals are a default feature"
    );
    assert!(has(&facade_tree(&["--features", "dns"]), "hickory-proto"));
    let lean = facade_tree(&["--no-default-features"]);
    assert!(!has(&lean, "signal-hook"), "{}", lean.join("\n"));
}

/// The crates that go to crates.io say what they are, under which license,
/// with no made-up address; the others are never published.
#[test]
fn published_crates_carry_their_metadata_and_the_others_stay_unpublished() {
    let meta: serde_json::Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--format-version", "1"])).unwrap();
    let published = [
        "coro-rt",
        "coro-runtime",
        "coro-sync",
        "coro-net",
        "coro-macros",
        "coro-tokio",
        "coro-profile",
    ];
    let packages = meta["packages"].as_array().unwrap();
    for p in packages {
        let name = p["name"].as_str().unwrap();
        let dir = Path::new(p["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap();
        if !published.contains(&name) {
            // `publish = false` reads as an empty list of registries.
            assert_eq!(
                p["publish"],
                serde_json::json!([]),
                "{name} could be published"
            );
            continue;
        }
        assert!(
            p["publish"].is_null(),
            "{name} is not published to crates.io"
        );
        for key in ["description", "license", "readme", "rust_version"] {
            assert!(p[key].is_string(), "{name} has no {key}");
        }
        assert_eq!(p["license"], "MIT OR Apache-2.0", "{name}");
        for key in ["keywords", "categories"] {
            assert!(
                p[key].as_array().is_some_and(|a| !a.is_empty()),
                "{name} has no {key}"
            );
        }
        for key in ["repository", "homepage", "documentation"] {
            if let Some(url) = p[key].as_str() {
                assert!(
                    url.starts_with("https://docs.rs/") || !url.contains(".invalid"),
                    "{name}'s {key} is made up: {url}"
                );
            }
        }
        for file in [
            "LICENSE-MIT",
            "LICENSE-APACHE",
            p["readme"].as_str().unwrap(),
        ] {
            assert!(dir.join(file).is_file(), "{name} has no {file}");
        }
        if p["features"].as_object().is_some_and(|f| !f.is_empty()) {
            assert!(
                p["metadata"]["docs"]["rs"]["all-features"] == true,
                "{name}: docs.rs does not document every feature"
            );
        }
    }
    for name in published {
        assert!(
            packages.iter().any(|p| p["name"] == name),
            "no package {name}"
        );
    }
}
