//! The `coro-profile` tool on a real profile: `report` writes one
//! self-contained page that headless Chromium renders (a screenshot, and
//! the DOM after its script ran: table, chart, warnings, sorting); `diff`
//! and `show` print tables; mistakes get messages and exit status 2.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use coro::profile;
use coro_test_support::hog::{spin, spin_until_warned};
use coro_test_support::TempDir;

const TOOL: &str = env!("CARGO_BIN_EXE_coro-profile");

/// Spins for `d`; a spin past `threshold` goes on until the watchdog has
/// warned about it.
fn spin_past(d: Duration, threshold: Duration) {
    if d >= threshold {
        spin_until_warned(d);
    } else {
        spin(d);
    }
}

/// Records a profile with a hog in a `parse` region (and so a latency
/// warning), a sleeper and some yielding threads; `hog` sets its length.
fn record(path: &Path, hog: Duration) {
    let threshold = Duration::from_millis(30);
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(threshold))
        .build()
        .unwrap();
    let p = rt.block_on(move || {
        profile::start().unwrap();
        let sleeper = coro::Builder::new()
            .name("sleeper <&>".into())
            .spawn(|| coro::sleep(Duration::from_millis(60)))
            .unwrap();
        let workers: Vec<_> = (0..3)
            .map(|i| {
                coro::Builder::new()
                    .name("worker".into())
                    .spawn(move || {
                        for _ in 0..10 + i {
                            spin(Duration::from_micros(300));
                            coro::yield_now();
                        }
                    })
                    .unwrap()
            })
            .collect();
        coro::Builder::new()
            .name("upload".into())
            .spawn(move || profile::region("parse", || spin_past(hog, threshold)))
            .unwrap()
            .join()
            .unwrap();
        for w in workers {
            w.join().unwrap();
        }
        sleeper.join().unwrap().unwrap();
        coro::sleep(Duration::from_millis(20)).unwrap();
        profile::stop().unwrap()
    });
    p.save(path).unwrap();
}

fn tool(args: &[&str]) -> Output {
    Command::new(TOOL).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn report_writes_one_self_contained_page() {
    let d = TempDir::new("report");
    let prof = d.0.join("run.jsonl");
    record(&prof, Duration::from_millis(80));
    let out = tool(&["report", prof.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The report counts the profile's warnings: the hog's, and any other
    // slice a loaded machine's preemption stretched past the threshold.
    let warned = coro_profile::load(&prof).unwrap().latency_warnings;
    assert!(
        warned.iter().any(|w| w.name.as_deref() == Some("upload")),
        "{warned:?}"
    );
    assert!(
        text(&out.stdout).contains(&format!("{} latency warnings", warned.len())),
        "{}",
        text(&out.stdout)
    );
    let page = std::fs::read_to_string(d.0.join("run.html")).unwrap(); // default name
    for needle in [
        "<table id=\"entries\"",
        "<svg id=\"chart\"",
        "<table id=\"warnings\"",
        "data-key=\"wall\"",
        ">parse</td>",
        "sleeper &lt;&amp;&gt;",
        ">&lt;wait&gt;</td>",
        ">&lt;scheduler&gt;</td>",
        "<script>",
        "<style>",
    ] {
        assert!(page.contains(needle), "no {needle:?} in the page");
    }
    // Nothing is fetched: no external scripts, styles, images or fonts.
    for bad in ["src=", "href=", "url(", "@import", "http:", "https:"] {
        assert!(
            !page.contains(bad),
            "the page refers to something outside it: {bad:?}"
        );
    }
    let out = tool(&[
        "report",
        prof.to_str().unwrap(),
        "-o",
        d.0.join("x.html").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(d.0.join("x.html").exists());
}

/// Fails naming the tool (and its Debian package) when it is missing.
fn chromium() -> &'static str {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "this test drives `chromium` (Debian package chromium); `bash scripts/test.sh` installs it"
    );
    "chromium"
}

/// Headless Chromium with a fresh profile and nothing that reaches the
/// network (the machine has none: without these it waits for it).
fn headless(profile_dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("timeout")
        .arg("90")
        .arg(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        text(&out.stderr)
    );
    out
}

/// Writes the report of `prof` into `d` and returns its `file://` address.
fn report_url(d: &TempDir, prof: &Path) -> String {
    let page = d.path("report.html");
    let out = tool(&[
        "report",
        prof.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    format!("file://{}", page.display())
}

/// A screenshot of `url`, 1280 pixels wide and `height` high: a real PNG
/// file, `name` in `d` (and in the directory `CORO_KEEP_SCREENSHOTS`
/// names, if set: how the guide's pictures are made).
fn screenshot(d: &TempDir, url: &str, height: u32, name: &str) -> Vec<u8> {
    let shot = d.path(name);
    headless(
        &d.path("chrome-1"),
        &[
            &format!("--window-size=1280,{height}"),
            &format!("--screenshot={}", shot.display()),
            url,
        ],
    );
    let png = std::fs::read(&shot).expect("chromium wrote no screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    if let Some(keep) = std::env::var_os("CORO_KEEP_SCREENSHOTS") {
        std::fs::copy(&shot, Path::new(&keep).join(name)).unwrap();
    }
    png
}

#[test]
fn chromium_renders_the_report_with_its_table_chart_and_sorting() {
    let d = TempDir::new("chromium");
    let prof = d.0.join("run.jsonl");
    record(&prof, Duration::from_millis(80));
    let url = report_url(&d, &prof);

    // A screenshot: a real PNG of the page.
    let png = screenshot(&d, &url, 1000, "report.png");
    assert!(
        png.len() > 20_000,
        "a {} byte screenshot is too small for the page",
        png.len()
    );
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1280, 1000));

    // The DOM after the script ran: sorted by calls, ascending, from the
    // address; the chart has its bars.
    let dom = text(
        &headless(
            &d.0.join("chrome-2"),
            &["--dump-dom", &format!("{url}#sort=calls-asc")],
        )
        .stdout,
    );
    assert!(
        dom.contains("data-sortable=\"ready\""),
        "the script did not run:\n{dom}"
    );
    assert!(dom.contains("data-sorted-by=\"calls-asc\""), "{dom}");
    assert!(dom.contains("<svg id=\"chart\""), "{dom}");
    assert!(dom.matches("<g class=\"bar\"").count() >= 5, "{dom}");
    assert!(dom.matches("<rect ").count() >= 5, "{dom}");
    assert!(
        dom.contains("id=\"warnings\"") && dom.contains(">upload</td>"),
        "{dom}"
    );
    // The rows' calls, in table order, ascend.
    let body = &dom[dom.find("<tbody>").unwrap()..dom.find("</tbody>").unwrap()];
    let calls: Vec<u64> = body
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let cell = row.split("<td class=\"n\" data-v=\"").nth(1).unwrap();
            cell[..cell.find('"').unwrap()].parse().unwrap()
        })
        .collect();
    assert!(calls.len() >= 6, "{calls:?}");
    assert!(
        calls.windows(2).all(|w| w[0] <= w[1]),
        "not sorted by calls: {calls:?}"
    );
}

#[test]
fn diff_and_show_print_what_changed() {
    let d = TempDir::new("diff");
    let (a, b) = (d.0.join("a.jsonl"), d.0.join("b.jsonl"));
    record(&a, Duration::from_millis(20));
    // A hog far longer than everything else, so its growth tops the diff
    // even when a loaded machine stretches the other entries.
    record(&b, Duration::from_millis(400));
    let out = tool(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.starts_with("A: "), "{t}");
    assert!(t.contains("NAME") && t.contains("CHANGE"), "{t}");
    // The hog's region grew most: the first row with a positive change
    // (rows come by the size of their change, and what shrank most can
    // come first: A's share of waiting, when a loaded machine stretches
    // A's sleeps).
    let first = t
        .lines()
        .skip_while(|l| !l.starts_with("NAME"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .find(|l| l.contains(" +"))
        .unwrap_or_else(|| panic!("no row grew: {t}"));
    assert!(first.starts_with("parse "), "{t}");
    // B's hog is warned about. A's 20 ms spin is not, on an idle machine,
    // but preemption on a loaded one can stretch any slice of A past the
    // 30 ms threshold: A's count is not checked.
    let warnings = t
        .lines()
        .find(|l| l.starts_with("latency warnings: A "))
        .unwrap_or_else(|| panic!("no latency warnings line: {t}"));
    let in_b = warnings
        .split(", B ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(in_b.is_some_and(|n| n >= 1), "{t}");

    let out = tool(&["show", b.to_str().unwrap()]);
    assert!(out.status.success());
    let t = text(&out.stdout);
    assert!(
        t.contains(" region    parse") && t.contains("latency warning: #"),
        "{t}"
    );
}

#[test]
fn mistakes_get_messages_and_status_two() {
    let d = TempDir::new("errors");
    for (args, msg) in [
        (vec![], "a command is needed"),
        (vec!["frobnicate"], "unknown command \"frobnicate\""),
        (vec!["report"], "report needs a PROFILE"),
        (vec!["report", "a", "b"], "one profile at a time"),
        (vec!["report", "a", "-o"], "-o needs a file name"),
        (vec!["diff", "a"], "diff needs two profiles"),
    ] {
        let out = tool(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(msg) && err.contains("usage:"),
            "{args:?}: {err}"
        );
    }
    // Files that are not profiles, or missing: status 1, the file named.
    let junk = d.0.join("junk.txt");
    std::fs::write(&junk, "hello\n").unwrap();
    let out = tool(&["report", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("junk.txt: coro profile, line 1"),
        "{}",
        text(&out.stderr)
    );
    let out = tool(&["show", d.0.join("missing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("missing"));
    let out = tool(&["--help"]);
    assert!(out.status.success() && text(&out.stdout).contains("coro-profile report PROFILE"));
}

/// The report's timeline of the flight recorder, rendered by
/// Chromium: a row per thread, the hog's resume (reported by the latency
/// watchdog) drawn red with its length, the scheduler's waits. Its
/// screenshot is docs/profile-timeline.png.
#[test]
fn chromium_renders_the_flight_recorder_timeline() {
    let d = TempDir::new("timeline");
    let prof = d.0.join("run.jsonl");
    record(&prof, Duration::from_millis(80));
    let p = coro_profile::load(&prof).unwrap();
    let hog = p
        .timeline
        .iter()
        .find(|s| s.latency_warning)
        .unwrap_or_else(|| {
            panic!(
                "the hog's resume is in the profile's timeline: {:#?}",
                p.timeline
            )
        });
    assert!(hog.name.ends_with(" upload"), "{hog:?}");
    assert!(hog.dur >= Duration::from_millis(30), "{hog:?}");
    assert!(p.timeline.iter().any(|s| s.track == 0 && s.name == "wait"));
    assert!(p.timeline.iter().any(|s| s.what == "park: sleep"));

    let url = report_url(&d, &prof);
    let png = screenshot(&d, &url, 1300, "timeline.png");
    assert!(png.len() > 10_000, "{} bytes", png.len());
    let dom = text(&headless(&d.0.join("chrome-2"), &["--dump-dom", &url]).stdout);
    assert!(dom.contains("<svg id=\"timeline\""), "{dom}");
    assert!(dom.contains(">scheduler</text>"), "{dom}");
    let hogs: Vec<&str> = dom.split("<rect class=\"span hog\"").skip(1).collect();
    assert!(!hogs.is_empty(), "no red span:\n{dom}");
    assert!(hogs[0].contains("upload: "), "{}", hogs[0]);
    assert!(dom.matches("<rect class=\"span\"").count() >= 10, "{dom}");
}
