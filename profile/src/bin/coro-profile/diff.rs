//! `coro-profile diff A B`: what changed between two runs, entry by entry,
//! as a text table.
//!
//! Runs of different lengths compare by share of their interval, so the
//! main column is the change in percentage points of the interval; wall
//! time per call and CPU time per second of interval follow. Entries match
//! by kind and name; one present in only one run is marked `new` or `gone`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use coro_profile::{Entry, Kind, Profile};

use crate::fmt::{human, per_call, percent};

/// One entry of both runs.
struct Row<'a> {
    kind: Kind,
    name: &'a str,
    a: Option<&'a Entry>,
    b: Option<&'a Entry>,
}

fn share(e: Option<&Entry>, p: &Profile) -> f64 {
    e.map_or(0.0, |e| percent(e.wall, p.wall))
}

/// CPU milliseconds per second of the interval.
fn cpu_rate(e: Option<&Entry>, p: &Profile) -> f64 {
    let secs = p.wall.as_secs_f64();
    match e {
        Some(e) if secs > 0.0 => e.usage.cpu().as_secs_f64() * 1e3 / secs,
        _ => 0.0,
    }
}

fn call(e: Option<&Entry>) -> String {
    match e {
        Some(e) if e.calls > 0 => human(per_call(e.wall, e.calls)),
        _ => "-".into(),
    }
}

/// Renders the comparison of `a` (before) and `b` (after).
pub fn diff(a: &Profile, an: &str, b: &Profile, bn: &str) -> String {
    let mut rows: BTreeMap<(Kind, &str), Row<'_>> = BTreeMap::new();
    for (second, p) in [(false, a), (true, b)] {
        for e in &p.entries {
            let row = rows.entry((e.kind, &e.name)).or_insert(Row {
                kind: e.kind,
                name: &e.name,
                a: None,
                b: None,
            });
            *(if second { &mut row.b } else { &mut row.a }) = Some(e);
        }
    }
    let mut rows: Vec<Row<'_>> = rows.into_values().collect();
    rows.sort_by(|x, y| {
        let dx = (share(x.b, b) - share(x.a, a)).abs();
        let dy = (share(y.b, b) - share(y.a, a)).abs();
        dy.total_cmp(&dx).then(x.name.cmp(y.name))
    });
    let mut o = String::new();
    let head = |p: &Profile| {
        format!(
            "{} pid {}, {} interval, {} CPU, {} latency warnings",
            if p.program.is_empty() {
                "?"
            } else {
                &p.program
            },
            p.pid,
            human(p.wall),
            human(p.usage.cpu()),
            p.latency_warnings.len()
        )
    };
    let _ = writeln!(o, "A: {an}: {}", head(a));
    let _ = writeln!(o, "B: {bn}: {}", head(b));
    let _ = writeln!(
        o,
        "\n{:<28} {:<9} {:>8} {:>8} {:>8}  {:>11} {:>11}  {:>9} {:>9}  {:>8} {:>8}",
        "NAME",
        "KIND",
        "A %",
        "B %",
        "CHANGE",
        "A WALL/CALL",
        "B WALL/CALL",
        "A CPU*",
        "B CPU*",
        "A CALLS",
        "B CALLS"
    );
    for r in &rows {
        let (sa, sb) = (share(r.a, a), share(r.b, b));
        let change = match (r.a, r.b) {
            (None, Some(_)) => "new".to_owned(),
            (Some(_), None) => "gone".to_owned(),
            _ => format!("{:+.1}", sb - sa),
        };
        let calls = |e: Option<&Entry>| e.map_or("-".to_owned(), |e| e.calls.to_string());
        let _ = writeln!(
            o,
            "{:<28} {:<9} {:>8.1} {:>8.1} {:>8}  {:>11} {:>11}  {:>9.1} {:>9.1}  {:>8} {:>8}",
            truncate(r.name, 28),
            r.kind.as_str(),
            sa,
            sb,
            change,
            call(r.a),
            call(r.b),
            cpu_rate(r.a, a),
            cpu_rate(r.b, b),
            calls(r.a),
            calls(r.b)
        );
    }
    let _ = writeln!(
        o,
        "\n%: share of the run's interval; CHANGE: B minus A in points (largest first);\n\
         CPU*: user + system ms per second of the interval."
    );
    let warn = |p: &Profile| {
        p.latency_warnings
            .iter()
            .map(|w| w.ran)
            .max()
            .unwrap_or(Duration::ZERO)
    };
    if !a.latency_warnings.is_empty() || !b.latency_warnings.is_empty() {
        let _ = writeln!(
            o,
            "latency warnings: A {} (longest {}), B {} (longest {})",
            a.latency_warnings.len(),
            human(warn(a)),
            b.latency_warnings.len(),
            human(warn(b))
        );
    }
    o
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
