//! The relay opts in to copying idle stacks out
//! (`RuntimeBuilder::idle_stack_copy_out`, in `src/main.rs`) on the
//! promise that it lends no green thread's stack to another OS thread
//! across a park. This keeps the promise checked: the source may not use
//! the scoped-thread APIs that lend a thread's locals to OS threads.

use std::path::Path;

/// APIs that let OS threads borrow the calling thread's stack.
const LENDERS: &[&str] = &[
    "thread::scope",
    "spawn_scoped",
    "rayon::",
    "crossbeam",
    "par_iter",
];

fn scan(dir: &Path, hits: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            scan(&path, hits);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for l in LENDERS {
                    if code.contains(l) {
                        hits.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
}

#[test]
fn the_relay_lends_no_stack_to_os_threads() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut hits = Vec::new();
    scan(&src, &mut hits);
    assert!(
        hits.is_empty(),
        "the relay copies idle stacks out (src/main.rs) on the promise that no OS thread \
         borrows a green thread's stack; these lines break it (drop the opt-in or the loan):\n{}",
        hits.join("\n")
    );
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    assert!(
        main.contains("idle_stack_copy_out(true)"),
        "the opt-in moved"
    );
}
