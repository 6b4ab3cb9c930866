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
            "locked by another mail-relay (pid {})",
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
                "spool_dir = \"{}\"\nmaildir = \"{}\"\n{extra}",
                tmp.0.join("spool").display(),
                tmp.0.join("maildir").display()
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
