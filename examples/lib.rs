//! Shared helpers for the examples.

/// Prints log records at INFO and above to standard error (the runtime
/// reports latency warnings through `log`).
#[derive(Debug)]
pub struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("[{} {}] {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

/// Installs [`Stderr`] as the logger.
///
/// # Panics
///
/// If a logger is installed already.
pub fn log_to_stderr() {
    log::set_logger(&Stderr).expect("a logger was installed already");
    log::set_max_level(log::LevelFilter::Info);
}
