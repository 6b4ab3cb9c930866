//! Storage faults injected for real: an `LD_PRELOAD` shim
//! (`util/fault_shim.c`, built here with the machine's C compiler) makes
//! fsync, fdatasync, write, pwrite or rename fail with EIO or ENOSPC on the
//! spool's files while a trigger file exists. A 4xx after DATA must mean
//! that the message will not be delivered from this spool, and a 250 that
//! it will be, exactly once, through the fault, its end and a restart.

mod util;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use util::{relay_to, require, Relay, Sink, TempDir, LIMIT};

/// The shim, built for one test, and its trigger.
struct Shim {
    so: PathBuf,
    trigger: PathBuf,
    log: PathBuf,
}

impl Shim {
    /// Compiles the shim into `dir`.
    fn build(dir: &Path) -> Shim {
        require("cc", "gcc");
        let src = dir.join("fault_shim.c");
        std::fs::write(&src, include_str!("util/fault_shim.c")).unwrap();
        let so = dir.join("fault_shim.so");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&so)
            .arg(&src)
            .arg("-ldl")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the fault shim does not build:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Shim {
            so,
            trigger: dir.join("fault.trigger"),
            log: dir.join("fault.log"),
        }
    }

    /// The relay's environment: the shim loaded, faults on the files
    /// under `spool` only.
    fn env(&self, spool: &Path) -> Vec<(String, String)> {
        let s = |p: &Path| p.display().to_string();
        vec![
            ("LD_PRELOAD".into(), s(&self.so)),
            ("FAULT_TRIGGER".into(), s(&self.trigger)),
            ("FAULT_LOG".into(), s(&self.log)),
            ("FAULT_DIR".into(), s(spool)),
        ]
    }

    /// Makes these calls fail from now on (lines `CALL ERRNO`).
    fn arm(&self, faults: &str) {
        let tmp = self.trigger.with_extension("new");
        std::fs::write(&tmp, faults).unwrap();
        std::fs::rename(&tmp, &self.trigger).unwrap();
    }

    /// Ends the faults.
    fn disarm(&self) {
        let _ = std::fs::remove_file(&self.trigger);
    }

    /// The failures injected so far, one line each (`CALL ERRNO PATH`).
    fn injected(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Batch files in the spool's `queue/` (journals left out).
fn batch_files(relay: &Relay) -> Vec<String> {
    std::fs::read_dir(relay.spool_queue())
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.contains('.'))
                .collect()
        })
        .unwrap_or_default()
}

/// Stops `relay` gracefully (SIGTERM, a successful exit) and asserts that
/// its last words count `left` (`"0 messages (0 batch files)"`) as left
/// in the spool; returns its log.
#[track_caller]
fn stop_reporting(relay: &mut Relay, left: &str) -> String {
    relay.terminate();
    assert!(relay.wait_exit().success(), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains(&format!("stopped; {left} left in the spool")),
        "{log}"
    );
    log
}

/// Starts a relay on the spool in `dir` (with `config`) and asserts that
/// it found nothing there to deliver.
#[track_caller]
fn start_on_an_empty_spool(dir: &Path, config: &str) -> Relay {
    let relay = Relay::start_in(dir, config);
    let log = relay.log();
    assert!(!log.contains("found in the spool"), "{log}");
    relay
}

/// The client sends its message (`Subject: again`) once more through
/// `relay`: the sink gets it, and only it.
#[track_caller]
fn send_again_and_see_it_delivered_once(relay: &Relay, sink: &Sink) {
    let mut c = relay.client();
    c.message("s@example.test", &["a@example.test"], &body("again", 1024));
    let got = sink.wait_messages(1);
    relay.wait_spool_empty();
    assert_eq!(got.len(), 1);
    assert!(got[0].contains("Subject: again"), "{}", got[0]);
}

/// A message body of about `size` octets, marked with `tag`.
fn body(tag: &str, size: usize) -> String {
    let mut b = format!("Subject: {tag}\r\nMessage-ID: <{tag}@load.test>\r\n\r\n");
    while b.len() < size {
        b.push_str("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-\r\n");
    }
    b
}

#[test]
fn a_failed_sync_of_the_queue_directory_leaves_nothing_to_deliver() {
    let tmp = TempDir::new("fault-dirsync");
    let shim = Shim::build(&tmp.0);
    let sink = Sink::start(&tmp.0, &[]);
    let config = relay_to(&sink.addr(), "");
    let spool = tmp.0.join("spool");
    let mut relay = Relay::start_with_env(&tmp.0, &config, &shim.env(&spool));

    // The batch file is written and synced (fdatasync works), renamed into
    // queue/, and the sync of queue/ fails.
    shim.arm("fsync EIO\n");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(body("refused", 1024).as_bytes());
    c.send(".");
    let (code, text) = c.reply().unwrap();
    shim.disarm();
    assert_eq!(code, 451, "{text}");
    let injected = shim.injected();
    assert!(
        injected.starts_with("fsync EIO ") && injected.contains("/spool/queue"),
        "the fault did not hit the sync of queue/: {injected:?}"
    );
    // Told 451, the message is not in the spool.
    assert_eq!(batch_files(&relay), Vec::<String>::new(), "{}", relay.log());
    c.cmd("QUIT", 221);

    // The stop reports what is there, and the next start finds nothing.
    stop_reporting(&mut relay, "0 messages (0 batch files)");
    let again = start_on_an_empty_spool(&tmp.0, &config);
    // The client sends it again: delivered once.
    send_again_and_see_it_delivered_once(&again, &sink);
}

/// The Python client of the load test: `threads` threads, each on its own
/// connection (a new one after a refusal), send 1 KB messages (every tenth
/// 100 KB, streamed into the spool) until `stop_file` exists, and print
/// one line per message: its tag and the final reply's code.
const LOAD_CLIENT: &str = r#"
import os, smtplib, sys, threading
host, port, threads, stop_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lines = []
lock = threading.Lock()
def body(tag, size):
    b = "Subject: %s\r\nMessage-ID: <%s@load.test>\r\n\r\n" % (tag, tag)
    line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-\r\n"
    return b + line * (size // len(line) + 1)
def run(t):
    n = 0
    s = None
    while not os.path.exists(stop_file):
        tag = "m%d-%d" % (t, n)
        size = 100 * 1024 if n % 10 == 9 else 1024
        n += 1
        try:
            if s is None:
                s = smtplib.SMTP(host, port, timeout=60)
                s.ehlo("load.test")
            s.mail("s@example.test")
            s.rcpt("a@example.test")
            code, _ = s.data(body(tag, size))
        except smtplib.SMTPDataError as e:
            code = e.smtp_code
        except smtplib.SMTPResponseException as e:
            code = e.smtp_code
        with lock:
            lines.append("%s %d" % (tag, code))
        if code != 250:
            try:
                s.quit()
            except Exception:
                pass
            s = None
    if s is not None:
        s.quit()
ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(lines))
"#;

/// The tag of each message the sink received (its `Subject:`).
fn received_tags(sink: &Sink) -> Vec<String> {
    sink.messages()
        .iter()
        .filter_map(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("Subject: "))
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn under_load_every_fault_refuses_and_loses_nothing() {
    require("python3", "python3");
    let tmp = TempDir::new("fault-load");
    let shim = Shim::build(&tmp.0);
    let sink = Sink::start(&tmp.0, &[]);
    let config = relay_to(&sink.addr(), "");
    let spool = tmp.0.join("spool");
    let mut relay = Relay::start_with_env(&tmp.0, &config, &shim.env(&spool));

    let stop_file = tmp.0.join("load.stop");
    let client = {
        let (port, stop) = (relay.addr.port().to_string(), stop_file.clone());
        std::thread::spawn(move || {
            let out = Command::new("python3")
                .args(["-c", LOAD_CLIENT, "127.0.0.1", &port, "8"])
                .arg(&stop)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "the load client failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
    };
    // Clean, then each fault for a while, then clean again.
    let phases = [
        "",
        "fsync EIO\n",
        "",
        "fdatasync EIO\n",
        "",
        "write ENOSPC\npwrite ENOSPC\n",
        "",
        "rename EIO\n",
        "",
        "fsync EIO\nfdatasync EIO\nwrite ENOSPC\npwrite ENOSPC\nrename EIO\n",
        "",
    ];
    for faults in phases {
        if faults.is_empty() {
            shim.disarm();
        } else {
            shim.arm(faults);
        }
        std::thread::sleep(Duration::from_millis(700));
    }
    shim.disarm();
    std::fs::write(&stop_file, "").unwrap();
    let out = client.join().unwrap();

    let mut replies: HashMap<String, u16> = HashMap::new();
    for line in out.lines() {
        let (tag, code) = line.split_once(' ').unwrap();
        replies.insert(tag.to_owned(), code.parse().unwrap());
    }
    let acknowledged: Vec<&String> = replies
        .iter()
        .filter(|(_, &c)| c == 250)
        .map(|(t, _)| t)
        .collect();
    let refused: Vec<&String> = replies
        .iter()
        .filter(|(_, &c)| (400..500).contains(&c))
        .map(|(t, _)| t)
        .collect();
    let other: Vec<(&String, &u16)> = replies
        .iter()
        .filter(|(_, &c)| c != 250 && !(400..500).contains(&c))
        .collect();
    let injected = shim.injected();
    for call in ["fsync", "fdatasync", "write", "rename"] {
        assert!(
            injected.contains(&format!("{call} ")),
            "no {call} fault was injected: {injected}"
        );
    }
    assert!(other.is_empty(), "replies neither 250 nor 4xx: {other:?}");
    assert!(
        !refused.is_empty(),
        "no message was refused under the faults"
    );
    // Accepted again once the faults ended.
    let mut c = relay.client();
    c.message("s@example.test", &["a@example.test"], &body("after", 1024));
    c.cmd("QUIT", 221);
    let after = "after".to_owned();
    let mut acknowledged = acknowledged;
    acknowledged.push(&after);

    // Every acknowledged message arrives, once; no refused one does.
    let t0 = Instant::now();
    let check = |phase: &str| {
        let tags = received_tags(&sink);
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for t in &tags {
            *seen.entry(t.as_str()).or_default() += 1;
        }
        let lost: Vec<&&String> = acknowledged
            .iter()
            .filter(|t| !seen.contains_key(t.as_str()))
            .collect();
        let duplicated: Vec<(&&str, &usize)> = seen.iter().filter(|(_, &n)| n > 1).collect();
        let delivered_refused: Vec<&&String> = refused
            .iter()
            .filter(|t| seen.contains_key(t.as_str()))
            .collect();
        eprintln!(
            "{phase}: {} acknowledged, {} refused, {} delivered, {} lost, {} duplicated, \
             {} refused but delivered",
            acknowledged.len(),
            refused.len(),
            tags.len(),
            lost.len(),
            duplicated.len(),
            delivered_refused.len()
        );
        (lost.len(), duplicated.len(), delivered_refused.len(), format!("lost {lost:?}, duplicated {duplicated:?}, refused but delivered {delivered_refused:?}"))
    };
    loop {
        let (lost, dup, refused_delivered, why) = check("after the faults");
        assert_eq!((dup, refused_delivered), (0, 0), "{why}");
        if lost == 0 {
            break;
        }
        assert!(t0.elapsed() < LIMIT, "{why}\n{}", relay.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    relay.wait_spool_empty();

    // A graceful stop reports an empty spool, and is right; the next start
    // delivers nothing more.
    stop_reporting(&mut relay, "0 messages (0 batch files)");
    assert_eq!(batch_files(&relay), Vec::<String>::new());
    let again = start_on_an_empty_spool(&tmp.0, &config);
    let mut c = again.client();
    c.message("s@example.test", &["a@example.test"], &body("marker", 100));
    let t0 = Instant::now();
    while !received_tags(&sink).iter().any(|t| t == "marker") {
        assert!(t0.elapsed() < LIMIT, "the marker did not arrive");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (lost, dup, refused_delivered, why) = check("after a restart");
    assert_eq!((lost, dup, refused_delivered), (0, 0, 0), "{why}");
}

#[test]
fn a_commit_that_outlasts_final_dot_is_removed_not_delivered() {
    let tmp = TempDir::new("fault-final-dot");
    let sink = Sink::start(&tmp.0, &[]);
    // Each commit takes 1 s; the session waits 300 ms.
    let slow = relay_to(
        &sink.addr(),
        "[timeouts]\nfinal_dot = \"300ms\"\n[testing]\ncommit_delay = \"1s\"\n",
    );
    let mut relay = Relay::start_in(&tmp.0, &slow);
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(body("late", 1024).as_bytes());
    assert_eq!(c.cmd(".", 451), "4.3.0 Error: queue file write error");
    // The commit completes later: its message is dropped at once.
    relay.wait_log("committed after its session stopped waiting; removed", 1);
    relay.wait_spool_empty();
    stop_reporting(&mut relay, "0 messages (0 batch files)");
    // Nothing of it after a restart either: the client's second attempt
    // is the one delivered.
    let again = start_on_an_empty_spool(&tmp.0, &relay_to(&sink.addr(), ""));
    send_again_and_see_it_delivered_once(&again, &sink);
}

#[test]
fn the_stop_report_counts_what_is_on_disk() {
    // A message deferred (nothing listens upstream) leaves a batch file.
    let tmp = TempDir::new("fault-report");
    let down = format!("127.0.0.1:{}", util::free_port());
    let config = relay_to(&down, "");
    let mut first = Relay::start_in(&tmp.0, &config);
    first
        .client()
        .message("s@example.test", &["a@example.test"], &body("kept", 100));
    first.wait_log("status=deferred", 1);
    stop_reporting(&mut first, "1 message (1 batch file)");
    let kept = batch_files(&first);
    assert_eq!(kept.len(), 1);

    // Another relay whose queue/ gets that file while it runs: it does not
    // track it, and its stop says what is there.
    let other = TempDir::new("fault-report-other");
    let mut second = Relay::start_in(&other.0, &config);
    std::fs::copy(
        first.spool_queue().join(&kept[0]),
        second.spool_queue().join(&kept[0]),
    )
    .unwrap();
    let log = stop_reporting(&mut second, "1 message (1 batch file)");
    assert!(
        log.contains("the spool holds 1 message in 1 batch file, this run tracked 0 in 0"),
        "{log}"
    );
}
