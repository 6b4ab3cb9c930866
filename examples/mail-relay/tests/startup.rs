//! Start-up as an admin meets it: one relay per spool (the second names
//! the first's pid), a failed start leaves no directories behind, a host
//! name works in `--listen`, and the banner says only what is configured.

mod util;

use std::process::Command;

use util::{free_port, Relay, TempDir};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mail-relay"))
}

#[test]
fn a_second_relay_on_the_same_spool_exits_naming_the_first() {
    let tmp = TempDir::new("lock");
    let relay = Relay::start_in(&tmp.0, "");
    let out = bin()
        .arg("--config")
        .arg(relay.config_path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "locked by pid {}, a mail-relay (",
            relay.child.id()
        )),
        "{err}"
    );
    // The first one's pid file is its own still, and it works on.
    let pid = std::fs::read_to_string(tmp.0.join("spool/mail-relay.pid")).unwrap();
    assert_eq!(pid.trim(), relay.child.id().to_string());
    let mut c = relay.client();
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: x\r\n\r\nx\r\n",
    );
    relay.wait_delivered(1);
}

#[test]
fn a_failed_start_creates_no_directories() {
    let tmp = TempDir::new("nodirs");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    for (why, extra) in [
        ("port in use", format!("listen = \"127.0.0.1:{port}\"\n")),
        (
            "bad certificate",
            "listen = \"127.0.0.1:0\"\n[tls]\ncert = \"/nonexistent/cert.pem\"\nkey = \"/nonexistent/key.pem\"\n"
                .to_owned(),
        ),
    ] {
        let config = tmp.0.join("relay.toml");
        std::fs::write(
            &config,
            format!(
                "spool_dir = \"{}\"\nmaildir = \"{}\"\n{}{extra}",
                tmp.0.join("spool").display(),
                tmp.0.join("maildir").display(),
                util::root_setting(""),
            ),
        )
        .unwrap();
        let out = bin().arg("--config").arg(&config).output().unwrap();
        assert!(!out.status.success(), "{why}: started");
        assert!(!tmp.0.join("spool").exists(), "{why}: spool created");
        assert!(!tmp.0.join("maildir").exists(), "{why}: maildir created");
    }
}

#[test]
fn listen_takes_a_host_name() {
    let tmp = TempDir::new("localhost");
    let port = free_port();
    let relay = Relay::start_with_args(&tmp.0, "", &["--listen", &format!("localhost:{port}")]);
    assert_eq!(relay.addr.port(), port);
    assert!(relay.addr.ip().is_loopback());
    relay.client().cmd("QUIT", 221);
}

#[test]
fn the_banner_names_only_what_is_configured() {
    let relay = Relay::start("banner", "relayhost = \"127.0.0.1:9\"\n");
    assert!(
        relay
            .banner
            .contains("relaying to the upstream 127.0.0.1:9"),
        "{}",
        relay.banner
    );
    assert!(!relay.banner.contains("local domains"), "{}", relay.banner);
    let relay = Relay::start(
        "banner-local",
        "relayhost = \"127.0.0.1:9\"\nlocal_domains = [\"home.test\"]\n",
    );
    assert!(
        relay.banner.contains("local domains into"),
        "{}",
        relay.banner
    );
}

#[test]
fn config_prints_the_effective_configuration_and_help_the_defaults() {
    let tmp = TempDir::new("config-cmd");
    let file = tmp.0.join("relay.toml");
    std::fs::write(&file, "max_recipients = 7\n[timeouts]\nrcpt = \"90s\"\n").unwrap();
    let out = bin()
        .arg("--config")
        .arg(&file)
        .args(["--max-sessions", "12", "config"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "max_recipients = 7\n",
        "max_sessions = 12\n",
        "rcpt = \"90s\"\n",
        "listen = \"127.0.0.1:2525\"\n",
        "hopcount_limit = 50\n",
        "minimal_backoff_time = \"5m\"\n",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    // What it prints reads back as the same configuration.
    std::fs::write(&file, &text).unwrap();
    let again = bin()
        .arg("--config")
        .arg(&file)
        .arg("config")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);

    let help = bin().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for d in [
        "[default: 127.0.0.1:2525]",
        "[default: spool]",
        "[default: 1000]",
        "[default: info]",
    ] {
        assert!(help.contains(d), "{d} not in --help:\n{help}");
    }
}

/// The relay with `args` (and `--run-as-root` when the tests run as root).
fn relay_cmd(args: &[&str]) -> Command {
    let mut c = bin();
    c.args(args);
    if !util::root_setting("").is_empty() {
        c.arg("--run-as-root");
    }
    c
}

/// Runs the relay with `args`, expecting it to fail (within the tests'
/// limit); returns its stderr.
#[track_caller]
fn fails(args: &[&str]) -> String {
    util::fails_to_start(&mut relay_cmd(args), &format!("{args:?}"))
}

#[test]
fn a_spool_dir_that_is_a_file_is_not_a_directory() {
    let tmp = TempDir::new("spool-file");
    let file = tmp.0.join("spool");
    std::fs::write(&file, "").unwrap();
    let err = fails(&[
        "--listen",
        "127.0.0.1:0",
        "--spool-dir",
        file.to_str().unwrap(),
        "--maildir",
        tmp.0.join("maildir").to_str().unwrap(),
    ]);
    assert!(
        err.contains(&format!(
            "spool_dir {}: not a directory (a regular file is there)",
            file.display()
        )),
        "{err}"
    );
    assert!(!err.contains("File exists"), "{err}");
}

#[test]
fn a_relayhost_is_host_and_port_without_a_scheme() {
    let fails = |args: &[&str]| {
        let out = bin().args(args).output().unwrap();
        assert!(!out.status.success(), "accepted {args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = fails(&["--relayhost", "http://x:25", "config"]);
    assert!(
        err.contains("no scheme: drop \"http://\"") && err.contains("HOST:PORT or [IPV6]:PORT"),
        "{err}"
    );
    assert!(!err.contains("IPv6 address"), "{err}");
    let err = fails(&["--relayhost", "2001:db8::1:25", "config"]);
    assert!(err.contains("an IPv6 address goes in brackets"), "{err}");
}

#[test]
fn a_relayhost_that_does_not_resolve_is_warned_about_at_start() {
    let relay = Relay::start("unresolved", "relayhost = \"mail.example.invalid:25\"\n");
    relay.wait_log(
        "relayhost mail.example.invalid:25: mail.example.invalid does not resolve now (",
        1,
    );
    relay.wait_log("mail for it waits in the queue until it does", 1);
    relay.client().cmd("QUIT", 221);
    let help = String::from_utf8(bin().arg("--help").output().unwrap().stdout).unwrap();
    assert!(help.contains("warned about, not refused"), "{help}");
}

#[test]
fn a_fatal_error_is_printed_once() {
    let tmp = TempDir::new("once");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = busy.local_addr().unwrap().to_string();
    let log = tmp.0.join("relay.log");
    let dirs = [
        "--spool-dir",
        &tmp.0.join("spool").display().to_string(),
        "--maildir",
        &tmp.0.join("maildir").display().to_string(),
    ]
    .map(str::to_owned);
    let what = format!("listen {listen}: ");
    let mut args: Vec<&str> = vec!["--listen", &listen];
    args.extend(dirs.iter().map(String::as_str));
    let err = fails(&args);
    assert_eq!(err.matches(&what).count(), 1, "{err}");
    // With a log file: once on stderr, once in the log.
    args.extend(["--log-file", log.to_str().unwrap()]);
    let err = fails(&args);
    assert_eq!(err.matches(&what).count(), 1, "{err}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.matches(&what).count(), 1, "{logged}");
}

#[test]
fn the_relay_makes_the_back_doors_directory() {
    let tmp = TempDir::new("bd-dir");
    let relay = Relay::start_in(
        &tmp.0,
        &format!("backdoor = \"{}/run/mail-relay/bd\"\n", tmp.0.display()),
    );
    for d in ["run", "run/mail-relay"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tmp.0.join(d))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{d}: {mode:o}");
    }
    let (ok, out) = relay.command(&["mailq"]);
    assert!(ok && out.contains("Mail queue is empty"), "{out}");
}

#[test]
fn help_names_every_table_and_config_hides_fault_injection() {
    let help = String::from_utf8(bin().arg("--help").output().unwrap().stdout).unwrap();
    for t in [
        "[timeouts]",
        "[tls]",
        "[queue]",
        "[smtp]",
        "[mx]",
        "[dkim]",
        "[routes]",
        "--user",
        "--run-as-root",
    ] {
        assert!(help.contains(t), "{t} not in --help:\n{help}");
    }
    let out = bin().arg("config").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success() && !text.contains("[testing]"),
        "{text}"
    );
    assert!(
        text.contains("run_as_root = false") && text.contains("require_safe_keys = true"),
        "{text}"
    );
}
