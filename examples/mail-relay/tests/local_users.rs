//! What another user of the same machine can do to the relay, tried as a
//! real second user (`nobody`, through util-linux's `setpriv`): read its
//! mail and spool (no: files 0600, directories 0700, whatever the umask),
//! take its lock (no), plant a directory or a link where it writes (it
//! refuses, and follows no link), read its private keys (it refuses keys
//! others may read). And the relay's own user: started as root with
//! `user`, it drops to that user for good, and says what it cannot
//! reopen as that user at SIGHUP; without `user`, it runs as root and
//! warns about it at start.
//!
//! These tests need root (to act as `nobody`), as the suite has in CI.

mod util;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use util::{require, Relay, TempDir, LIMIT};

/// The second user's uid and gid.
fn nobody() -> (u32, u32) {
    assert!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "this test acts as a second user (nobody) through setpriv: run it as root, as CI does"
    );
    require("setpriv", "util-linux");
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, "nobody"]).output().unwrap();
        assert!(out.status.success(), "no user nobody on this system");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

/// `setpriv` arguments that run a command as nobody.
fn as_nobody_args() -> Vec<String> {
    let (uid, gid) = nobody();
    vec![
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
        "--".into(),
    ]
}

/// Runs `cmd` as nobody; returns its output.
fn as_nobody(cmd: &[&str]) -> Output {
    Command::new("setpriv")
        .args(as_nobody_args())
        .args(cmd)
        .output()
        .unwrap()
}

/// Starts `cmd` as nobody in the background.
fn spawn_as_nobody(cmd: &[&str]) -> Child {
    Command::new("setpriv")
        .args(as_nobody_args())
        .args(cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Every file and directory under `dir`, `dir` included.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_owned()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() {
            let mut more: Vec<PathBuf> = std::fs::read_dir(&out[i])
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            more.sort();
            out.extend(more);
        }
        i += 1;
    }
    out
}

/// Writes a relay configuration of `extra` (with the tests' spool and
/// Maildir in `dir`) and runs the relay on it, expecting it not to start;
/// returns its stderr.
#[track_caller]
fn failed_start(dir: &Path, extra: &str) -> String {
    failed_start_with(
        dir,
        &format!(
            "listen = \"127.0.0.1:0\"\nspool_dir = \"{}\"\nmaildir = \"{}\"\n{}{extra}\n",
            dir.join("spool").display(),
            dir.join("maildir").display(),
            util::root_setting(extra),
        ),
    )
}

/// Runs the relay on the configuration `toml` (written into `dir`),
/// expecting it not to start (within the tests' limit); returns its
/// stderr.
#[track_caller]
fn failed_start_with(dir: &Path, toml: &str) -> String {
    let config = dir.join("relay.toml");
    std::fs::write(&config, toml).unwrap();
    util::fails_to_start(
        Command::new(env!("CARGO_BIN_EXE_mail-relay"))
            .arg("--config")
            .arg(&config),
        &format!("this configuration:\n{toml}"),
    )
}

#[test]
fn mail_and_the_spool_are_private_whatever_the_umask() {
    let closed = util::free_port();
    for mask in [0o022, 0o000] {
        let tmp = TempDir::new("private");
        let relay = Relay::start_with_umask(
            &tmp.0,
            &format!(
                "local_domains = [\"local.test\"]\n[routes]\n\"remote.test\" = \"127.0.0.1:{closed}\"\n\
                 [queue]\nminimal_backoff_time = \"1h\"\n"
            ),
            mask,
        );
        let mut c = relay.client();
        c.message(
            "s@client.test",
            &["a@local.test"],
            "Subject: local\r\n\r\nsecret one\r\n",
        );
        c.message(
            "s@client.test",
            &["b@remote.test"],
            "Subject: queued\r\n\r\nsecret two\r\n",
        );
        let t0 = Instant::now();
        let journal = || {
            std::fs::read_dir(relay.spool_queue())
                .unwrap()
                .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "state"))
        };
        while util::count(&relay.maildir_new()) < 1 || !journal() {
            assert!(
                t0.elapsed() < LIMIT,
                "no delivery and deferral:\n{}",
                relay.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut files = 0;
        for top in ["spool", "maildir"] {
            for p in walk(&tmp.0.join(top)) {
                let md = std::fs::symlink_metadata(&p).unwrap();
                let mode = md.mode() & 0o777;
                let want = if md.is_dir() { 0o700 } else { 0o600 };
                assert_eq!(
                    mode,
                    want,
                    "umask {mask:03o}: {} has mode {mode:03o}",
                    p.display()
                );
                if md.is_file() {
                    files += 1;
                    let out = as_nobody(&["cat", p.to_str().unwrap()]);
                    assert!(
                        !out.status.success(),
                        "umask {mask:03o}: nobody read {}: {}",
                        p.display(),
                        String::from_utf8_lossy(&out.stdout)
                    );
                }
            }
        }
        // Delivered mail, a queued message, its journal, the lock, the pid.
        assert!(files >= 5, "umask {mask:03o}: only {files} files");
        for dir in ["maildir/new", "spool/queue"] {
            let out = as_nobody(&["ls", tmp.0.join(dir).to_str().unwrap()]);
            assert!(
                !out.status.success(),
                "umask {mask:03o}: nobody listed {dir}"
            );
        }
    }
}

#[test]
fn another_user_cannot_take_the_spool_lock() {
    nobody();
    require("flock", "util-linux");
    let tmp = TempDir::new("steal-lock");
    let mut relay = Relay::start_in(&tmp.0, "");
    let lock = tmp.0.join("spool/mail-relay.lock");
    let lock = lock.to_str().unwrap();
    let out = as_nobody(&["flock", "--nonblock", "--shared", lock, "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Permission denied"),
        "{err}"
    );
    relay.terminate();
    assert!(relay.wait_exit().success());
    // With the relay stopped, nobody tries to keep it from starting again.
    let mut thief = spawn_as_nobody(&["flock", "--nonblock", lock, "sleep", "60"]);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = thief.try_wait().unwrap() {
            break s;
        }
        if held(lock) {
            let _ = thief.kill();
            let _ = thief.wait();
            panic!("nobody holds the relay's lock");
        }
        assert!(
            t0.elapsed() < LIMIT,
            "flock as nobody neither ended nor took the lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success());
    let relay = Relay::start_in(&tmp.0, "");
    relay.client().cmd("QUIT", 221);
}

/// The pid after "locked by pid " in `err`.
fn named_pid(err: &str) -> i32 {
    let rest = err
        .split("locked by pid ")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"));
    rest.split(',').next().unwrap().parse().unwrap()
}

#[test]
fn a_held_lock_names_its_holder_truthfully() {
    require("flock", "util-linux");
    let tmp = TempDir::new("holder");
    let mut relay = Relay::start_in(&tmp.0, "");
    relay.terminate();
    relay.wait_exit();
    let lock = tmp.0.join("spool/mail-relay.lock");
    // The file names a process that has exited.
    let mut gone = Command::new("true").spawn().unwrap();
    let stale = gone.id();
    gone.wait().unwrap();
    std::fs::write(&lock, format!("{stale}\n")).unwrap();
    let lock_s = lock.to_str().unwrap();
    let wait_held = |want: bool| {
        let t0 = Instant::now();
        while held(lock_s) != want {
            assert!(
                t0.elapsed() < LIMIT,
                "the lock was never {}",
                if want { "taken" } else { "freed" }
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    // Another program holds it (flock(1) itself: `-o` closes the lock's
    // descriptor in the command it runs).
    let mut other = Command::new("flock")
        .args(["-o", lock_s, "sleep", "60"])
        .process_group(0)
        .spawn()
        .unwrap();
    wait_held(true);
    let err = failed_start(&tmp.0, "");
    kill_group(&mut other);
    assert!(
        err.contains(&format!(
            "locked by pid {}, which is another program",
            other.id()
        )) && err.contains("flock"),
        "{err}"
    );
    assert!(!err.contains(&stale.to_string()), "{err}");
    wait_held(false);

    // The process that took it has exited; one that inherited its
    // descriptor keeps it.
    let mut heir = Command::new("sh")
        .args([
            "-c",
            &format!("exec 9<>{lock_s}; flock -x 9 && exec sleep 60"),
        ])
        .process_group(0)
        .spawn()
        .unwrap();
    wait_held(true);
    let err = failed_start(&tmp.0, "");
    kill_group(&mut heir);
    assert!(err.contains("which is not running"), "{err}");
    let pid = named_pid(&err);
    assert!(
        pid != heir.id() as i32 && !Path::new(&format!("/proc/{pid}")).exists(),
        "{err}"
    );
}

/// Whether someone holds a `flock` on `path`.
fn held(path: &str) -> bool {
    Command::new("flock")
        .args(["--nonblock", path, "true"])
        .status()
        .is_ok_and(|s| !s.success())
}

/// Kills the process group `child` leads, and reaps `child`.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
}

#[test]
fn a_spool_another_user_owns_is_refused_and_its_link_not_followed() {
    let (uid, gid) = nobody();
    let tmp = TempDir::new("planted");
    let secret = tmp.0.join("secret");
    std::fs::write(&secret, "root's own data\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&secret).unwrap();
    let spool = tmp.0.join("spool");
    std::fs::create_dir(&spool).unwrap();
    std::os::unix::fs::chown(&spool, Some(uid), Some(gid)).unwrap();
    let link = spool.join("mail-relay.lock");
    let out = as_nobody(&["ln", "-s", secret.to_str().unwrap(), link.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let err = failed_start(&tmp.0, "");
    assert!(
        err.contains(&format!("spool_dir {}: refusing it", spool.display()))
            && err.contains(&format!("belongs to nobody (uid {uid})"))
            && err.contains(&format!("chown -R root {}", spool.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "root's own data\n"
    );
    let after = std::fs::metadata(&secret).unwrap();
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec())
    );
}

#[test]
fn a_link_in_the_relays_own_spool_is_not_followed() {
    let tmp = TempDir::new("own-link");
    let mut relay = Relay::start_in(&tmp.0, "");
    relay.terminate();
    relay.wait_exit();
    let secret = tmp.0.join("secret");
    std::fs::write(&secret, "root's own data\n").unwrap();
    for name in ["mail-relay.lock", "mail-relay.pid"] {
        let link = tmp.0.join("spool").join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let err = failed_start(&tmp.0, "");
        assert!(
            err.contains(&format!("{}: a symbolic link is there", link.display()))
                && err.contains("never follows one"),
            "{name}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "root's own data\n",
            "{name}"
        );
        std::fs::remove_file(&link).unwrap();
    }
}

#[test]
fn paths_others_may_write_or_own_are_refused() {
    let (uid, gid) = nobody();
    let tmp = TempDir::new("shared-paths");
    let shared = tmp.0.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = tmp.0.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(uid), Some(gid)).unwrap();
    let their_log = tmp.0.join("their.log");
    std::fs::write(&their_log, "").unwrap();
    std::os::unix::fs::chown(&their_log, Some(uid), Some(gid)).unwrap();
    let s = |p: &Path| p.display().to_string();
    for (extra, want) in [
        (
            format!("spool_dir = \"{}\"\n", s(&shared)),
            vec![
                format!(
                    "spool_dir {}: refusing it: mode 0777 lets everyone write",
                    s(&shared)
                ),
                format!("chmod 700 {}", s(&shared)),
            ],
        ),
        (
            format!("spool_dir = \"{}/spool\"\n", s(&shared)),
            vec![
                format!("the directory {} above it has mode 0777", s(&shared)),
                format!("chmod o-w {}", s(&shared)),
            ],
        ),
        (
            format!("maildir = \"{}\"\n", s(&theirs)),
            vec![format!(
                "maildir {}: refusing it: it belongs to nobody (uid {uid})",
                s(&theirs)
            )],
        ),
        (
            format!("log_file = \"{}\"\n", s(&their_log)),
            vec![
                format!(
                    "log_file {}: refusing it: it belongs to nobody (uid {uid})",
                    s(&their_log)
                ),
                format!("chown root {}", s(&their_log)),
            ],
        ),
        (
            format!("backdoor = \"{}/bd\"\n", s(&shared)),
            vec![
                format!("backdoor {}: refusing it: mode 0777", s(&shared)),
                format!("chmod 700 {}", s(&shared)),
            ],
        ),
    ] {
        // TOML refuses a key given twice: the whole file is written here.
        let mut toml = "listen = \"127.0.0.1:0\"\nrun_as_root = true\n".to_owned();
        if !extra.starts_with("spool_dir") {
            toml.push_str(&format!("spool_dir = \"{}/spool\"\n", s(&tmp.0)));
        }
        if !extra.starts_with("maildir") {
            toml.push_str(&format!("maildir = \"{}/maildir\"\n", s(&tmp.0)));
        }
        toml.push_str(&extra);
        let err = failed_start_with(&tmp.0, &toml);
        for w in &want {
            assert!(err.contains(w.as_str()), "{extra}: {w:?} not in {err}");
        }
        assert!(!err.contains("allow_shared_directory"), "{err}");
        assert!(!tmp.0.join("spool").exists(), "{extra}: a spool was made");
    }
}

/// Makes an ed25519 private key (a DKIM key) at `path` with openssl.
#[track_caller]
fn make_ed25519_key(path: &Path) {
    require("openssl", "openssl");
    let made = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "openssl could not make a key");
}

#[test]
fn private_keys_others_may_read_are_refused_unless_allowed() {
    let tmp = TempDir::new("keys");
    let key = tmp.0.join("dkim.pem");
    make_ed25519_key(&key);
    let dkim = format!(
        "[dkim.\"example.test\"]\nselector = \"s\"\nkey_file = \"{}\"\n",
        key.display()
    );
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let err = failed_start(&tmp.0, &dkim);
        assert!(
            err.contains(&format!(
                "dkim.\"example.test\".key_file {}: mode {mode:04o} lets",
                key.display()
            )) && err.contains(&format!("chmod 600 {}", key.display()))
                && err.contains("require_safe_keys = false"),
            "{err}"
        );
        assert!(!tmp.0.join("spool").exists());
    }
    let relay = Relay::start("keys-warn", &format!("require_safe_keys = false\n{dkim}"));
    relay.wait_log("mode 0604 lets others read or change this private key", 1);
    relay.wait_log("using it as require_safe_keys = false", 1);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let relay = Relay::start("keys-safe", &dkim);
    assert!(!relay.log().contains("private key"), "{}", relay.log());
    // A key rotated in place with a mode others may read is refused at
    // SIGHUP too; the key in force stays.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    relay.hangup();
    relay.wait_log(
        &format!(
            "reload at SIGHUP: dkim.\"example.test\".key_file {}: mode 0644 lets others read \
             or change this private key",
            key.display()
        ),
        1,
    );
    relay.wait_log("the DKIM keys in force stay", 1);
}

/// The `Uid:`, `Gid:` and `Groups:` lines of every thread of `pid`.
fn ids_of_every_thread(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
        let lines: Vec<&str> = status
            .lines()
            .filter(|l| l.starts_with("Uid:") || l.starts_with("Gid:") || l.starts_with("Groups:"))
            .collect();
        out.push(
            lines
                .join(" | ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    out
}

#[test]
fn started_as_root_the_relay_runs_as_its_user() {
    let (uid, gid) = nobody();
    let tmp = TempDir::new("user");
    let log_file = tmp.0.join("mail.log");
    // A DKIM key of root's alone: read at start as root, not again.
    let key = tmp.0.join("dkim.pem");
    make_ed25519_key(&key);
    let relay = Relay::start_in(
        &tmp.0,
        &format!(
            "user = \"nobody\"\nlocal_domains = [\"local.test\"]\nlog_file = \"{}\"\nbackdoor = \"{}/run/bd\"\n\
             [dkim.\"example.test\"]\nselector = \"s\"\nkey_file = \"{}\"\n",
            log_file.display(),
            tmp.0.display(),
            key.display()
        ),
    );
    let pid = relay.child.id();
    let want =
        format!("Uid: {uid} {uid} {uid} {uid} | Gid: {gid} {gid} {gid} {gid} | Groups: {gid}");
    for ids in ids_of_every_thread(pid) {
        assert_eq!(ids, want);
    }
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    assert!(
        log().contains(&format!("running as nobody (uid {uid}) from now on")),
        "{}",
        log()
    );

    relay.client().message(
        "s@client.test",
        &["a@local.test"],
        "Subject: x\r\n\r\nx\r\n",
    );
    relay.wait_delivered(1);
    for top in ["spool", "maildir", "run"] {
        for p in walk(&tmp.0.join(top)) {
            let md = std::fs::symlink_metadata(&p).unwrap();
            assert_eq!(
                (md.uid(), md.gid()),
                (uid, gid),
                "{} is not nobody's",
                p.display()
            );
        }
    }
    assert_eq!(std::fs::metadata(&log_file).unwrap().uid(), uid);
    // The back door (made by the relay, as nobody) answers root.
    let (ok, out) = relay.command(&["mailq"]);
    assert!(ok && out.contains("Mail queue is empty"), "{out}");

    // SIGHUP as nobody: a live change applies.
    let config = relay.config_path();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("max_recipients = 1\n{text}")).unwrap();
    let hup = |n: usize, needle: &str| {
        relay.hangup();
        let t0 = Instant::now();
        while log().matches(needle).count() < n {
            assert!(t0.elapsed() < LIMIT, "{needle:?} not logged:\n{}", log());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    hup(1, "now in force: max_recipients");
    let denied = format!(
        "reload at SIGHUP: dkim.\"example.test\".key_file {}: Permission denied (os error 13) \
         (the relay runs as nobody (uid {uid}) since it started",
        key.display()
    );
    assert!(log().contains(&denied), "{}", log());
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@client.test>", 250);
    c.cmd("RCPT TO:<a@local.test>", 250);
    c.cmd("RCPT TO:<b@local.test>", 452);
    c.cmd("QUIT", 221);

    // What nobody cannot open again is said, naming the user.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    hup(
        1,
        &format!(
            "cannot read config file {}: Permission denied (os error 13) (the relay runs as \
             nobody (uid {uid}) since it started",
            config.display()
        ),
    );
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    // logrotate moved the log away: the relay cannot make a new one in a
    // directory of root's, and says so in the old one.
    let rotated = tmp.0.join("mail.log.1");
    std::fs::rename(&log_file, &rotated).unwrap();
    let t0 = Instant::now();
    relay.hangup();
    let needle = format!(
        "reopening the log: log_file {}: Permission denied (os error 13) (the relay runs as \
         nobody (uid {uid}) since it started",
        log_file.display()
    );
    while !std::fs::read_to_string(&rotated).unwrap().contains(&needle) {
        assert!(t0.elapsed() < LIMIT, "{needle:?} not logged");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!log_file.exists());
}

#[test]
fn started_as_root_without_a_user_the_relay_runs_and_warns() {
    nobody();
    let warning = "running as root: every SMTP session and the whole spool run with root's rights";
    let relay = Relay::start("root-warned", "run_as_root = false\n");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("QUIT", 221);
    for ids in ids_of_every_thread(relay.child.id()) {
        assert!(ids.starts_with("Uid: 0 0 0 0 | Gid: 0 0 0 0"), "{ids}");
    }
    let log = relay.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(warning)).collect();
    assert_eq!(lines.len(), 1, "the warning once:\n{log}");
    for w in [
        "warn: ",
        "user = \"NAME\"",
        "setcap cap_net_bind_service=+ep",
        "run_as_root = true",
    ] {
        assert!(lines[0].contains(w), "{w:?} not in {}", lines[0]);
    }
    drop(relay);

    // Running as root, meant: no warning.
    let relay = Relay::start("root-meant", "run_as_root = true\n");
    relay.client().cmd("QUIT", 221);
    let log = relay.log();
    assert!(
        log.contains("listening on") && !log.contains(warning),
        "{log}"
    );
    drop(relay);

    // A user that does not exist is still an error.
    let tmp = TempDir::new("no-such-user");
    let err = failed_start(&tmp.0, "user = \"no-such-user-here\"\n");
    assert!(err.contains("no user \"no-such-user-here\""), "{err}");
    assert!(!tmp.0.join("spool").exists());
}
