//! Helpers shared by the integration tests of coro-net.

#![allow(dead_code)]

pub mod dnsmasq;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Upper bound on any one test's run time.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Runs `f` as the first green thread of a fresh runtime, under a
/// `with_timeout` of [`LIMIT`] so a bug fails instead of hanging.
#[track_caller]
pub fn run<T: 'static>(f: impl FnOnce() -> io::Result<T> + 'static) -> io::Result<T> {
    coro::run(move || match coro::with_timeout(LIMIT, f) {
        Ok(r) => r,
        Err(_) => panic!("test ran past {LIMIT:?}"),
    })
}

/// Asserts that `r` failed with `kind`.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(r: io::Result<T>, kind: io::ErrorKind) -> io::Error {
    match r {
        Ok(v) => panic!("expected an error of kind {kind:?}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "unexpected error: {e}");
            e
        }
    }
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> io::Result<TempDir> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "coro-net-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` bytes of a recognisable pattern.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Every record logged in this process since [`capture_logs`], with its level.
pub static LOGS: std::sync::Mutex<Vec<(log::Level, String)>> = std::sync::Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        LOGS.lock().unwrap().push((r.level(), r.args().to_string()));
    }
    fn flush(&self) {}
}

/// Installs the logger that records into [`LOGS`] (once per process).
pub fn capture_logs() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Info);
    });
}
