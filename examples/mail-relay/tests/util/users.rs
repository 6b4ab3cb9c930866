//! Users of the submission service for the tests: lines made by the
//! relay's own `mail-relay passwd`, written into a users file.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// `mail-relay passwd USER ADDRESSES...` with `password` on its standard
/// input: its exit success and its output (stdout, then stderr).
pub fn passwd(user: &str, addresses: &[&str], password: &str) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mail-relay"))
        .arg("passwd")
        .arg(user)
        .args(addresses)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may end before it reads (a bad argument): then the
    // write fails, and its output says why.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes());
    let out = child.wait_with_output().unwrap();
    (out.status.success(), super::stdout_and_stderr(&out))
}

/// A users-file line, which the command must make.
#[track_caller]
pub fn user_line(user: &str, addresses: &[&str], password: &str) -> String {
    let (ok, out) = passwd(user, addresses, password);
    assert!(ok, "mail-relay passwd failed: {out}");
    out
}

/// Writes the users file at `path`, mode 0600.
pub fn write_users(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.concat()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
