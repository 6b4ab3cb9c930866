//! `coro-profile report`: one self-contained HTML page (inline CSS, SVG and
//! script; nothing fetched) with the interval's summary, a bar chart of
//! where the time went, a sortable table of the entries, the latency
//! warnings of the interval and the flight recorder's timeline (`timeline`).
//!
//! The table sorts by any column on a click; `#sort=KEY` or
//! `#sort=KEY-asc` in the page's address sorts it on load (keys are the
//! columns' `data-key` attributes: `name`, `kind`, `calls`, `wall`, ...).

use std::fmt::Write as _;
use std::time::Duration;

use coro_profile::{Entry, Kind, Profile};

use crate::fmt::{html, human, ms, per_call, percent, utc};

/// Entries drawn in the chart (the table has all of them).
const CHART_ROWS: usize = 15;

const CSS: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2430; margin: 24px 32px; background: #fbfbfd; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #5a6475; margin: 0 0 8px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 12px 0; }
.card { background: #fff; border: 1px solid #dde1e8; border-radius: 8px; padding: 8px 14px; min-width: 120px; }
.card b { display: block; font-size: 18px; }
.card span { color: #5a6475; font-size: 12px; }
table { border-collapse: collapse; background: #fff; border: 1px solid #dde1e8; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eceef3; white-space: nowrap; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f1f3f7; cursor: pointer; user-select: none; text-align: left; }
th.asc::after { content: " \25B2"; font-size: 10px; }
th.desc::after { content: " \25BC"; font-size: 10px; }
tr:hover td { background: #f6f8fc; }
.kind { border-radius: 4px; padding: 1px 6px; font-size: 12px; }
.k-thread { background: #e3ecff; } .k-region { background: #e6f6e6; }
.k-wait { background: #eceef3; } .k-scheduler { background: #fff0d9; }
.pct { display: inline-block; height: 8px; background: #3b6fd4; margin-right: 6px; vertical-align: middle; border-radius: 2px; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2430; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 14px; vertical-align: -2px; border-radius: 2px; }
.none { color: #5a6475; }
footer { color: #8a93a3; margin-top: 28px; font-size: 12px; }
"#;

const SCRIPT: &str = r#"
(function () {
  var t = document.getElementById('entries');
  var heads = Array.prototype.slice.call(t.tHead.rows[0].cells);
  function sortBy(i, desc) {
    var body = t.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var num = heads[i].dataset.type === 'num';
    rows.sort(function (a, b) {
      var x = a.cells[i].dataset.v, y = b.cells[i].dataset.v;
      var c = num ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return desc ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    heads.forEach(function (h, j) { h.className = (h.dataset.type === 'num' ? 'n ' : '') + (j === i ? (desc ? 'desc' : 'asc') : ''); });
    t.dataset.sortedBy = heads[i].dataset.key + (desc ? '-desc' : '-asc');
  }
  heads.forEach(function (h, i) {
    h.addEventListener('click', function () {
      var wasDesc = t.dataset.sortedBy === h.dataset.key + '-desc';
      var numeric = h.dataset.type === 'num';
      sortBy(i, t.dataset.sortedBy && t.dataset.sortedBy.indexOf(h.dataset.key + '-') === 0 ? !wasDesc : numeric);
    });
  });
  var m = /sort=([a-z_]+)(?:-(asc|desc))?/.exec(location.hash);
  var idx = m ? heads.findIndex(function (h) { return h.dataset.key === m[1]; }) : -1;
  if (idx >= 0) sortBy(idx, m[2] !== 'asc');
  t.dataset.sortable = 'ready';
})();
"#;

/// Colours of the chart's segments: user CPU, system CPU, off CPU.
const USER: &str = "#3b6fd4";
const SYS: &str = "#e8833a";
const OFF: &str = "#c9ced6";

/// Renders the report page.
pub fn report(p: &Profile, source: &str) -> String {
    let mut o = String::new();
    let title = if p.program.is_empty() {
        "coro profile".to_owned()
    } else {
        format!("coro profile: {} (pid {})", p.program, p.pid)
    };
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{CSS}</style></head><body>",
        html(&title)
    );
    let _ = writeln!(
        o,
        "<h1>{}</h1><p class=\"meta\">from {} &middot; started {} &middot; format version {}</p>",
        html(&title),
        html(source),
        utc(p.start),
        coro_profile::FORMAT_VERSION
    );
    summary(&mut o, p);
    chart(&mut o, p);
    table(&mut o, p);
    warnings(&mut o, p);
    crate::timeline::timeline(&mut o, p);
    let _ = writeln!(
        o,
        "<footer>Made by coro-profile. Times are wall time charged to each entry; \
         user and system are getrusage(RUSAGE_THREAD) deltas of the runtime's OS thread; \
         entries add up to the interval.</footer>\n<script>{SCRIPT}</script>\n</body></html>"
    );
    o
}

fn summary(o: &mut String, p: &Profile) {
    let cpu = p.usage.cpu();
    let busy = 100.0
        - p.entries
            .iter()
            .filter(|e| e.kind == Kind::Wait)
            .map(|e| percent(e.wall, p.wall))
            .sum::<f64>();
    let cards = [
        (human(p.wall), "interval (wall)".to_owned()),
        (
            human(cpu),
            format!("CPU, {:.1} % of the interval", percent(cpu, p.wall)),
        ),
        (
            format!("{busy:.1} %"),
            "not waiting in the poller".to_owned(),
        ),
        (p.entries.len().to_string(), "entries".to_owned()),
        (
            p.latency_warnings.len().to_string(),
            match p.latency_threshold {
                Some(t) => format!("latency warnings (over {})", human(t)),
                None => "latency warnings (off)".to_owned(),
            },
        ),
    ];
    o.push_str("<div class=\"cards\">");
    for (big, small) in cards {
        let _ = write!(
            o,
            "<div class=\"card\"><b>{}</b><span>{}</span></div>",
            html(&big),
            html(&small)
        );
    }
    o.push_str("</div>\n");
}

fn chart(o: &mut String, p: &Profile) {
    let rows: Vec<&Entry> = p.entries.iter().take(CHART_ROWS).collect();
    let max = rows
        .iter()
        .map(|e| e.wall)
        .max()
        .unwrap_or_default()
        .max(Duration::from_nanos(1));
    let (label_w, bar_w, right_w, row_h) = (230.0, 560.0, 150.0, 26.0);
    let width = label_w + bar_w + right_w;
    let height = row_h * rows.len() as f64 + 8.0;
    o.push_str("<h2>Where the time went</h2>\n");
    let _ = writeln!(
        o,
        "<p class=\"legend\">Bars: wall time of each entry (the longest is full width), split into\
         <span style=\"background:{USER}\"></span>user CPU<span style=\"background:{SYS}\"></span>system CPU\
         <span style=\"background:{OFF}\"></span>off CPU.</p>\n\
         <svg id=\"chart\" role=\"img\" aria-label=\"wall time per entry\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\">"
    );
    for (i, e) in rows.iter().enumerate() {
        let y = 4.0 + row_h * i as f64;
        let scale = bar_w / max.as_secs_f64();
        let total = e.wall.as_secs_f64() * scale;
        let user = e.usage.utime.as_secs_f64().min(e.wall.as_secs_f64()) * scale;
        let sys = e
            .usage
            .stime
            .as_secs_f64()
            .min(e.wall.as_secs_f64() - e.usage.utime.as_secs_f64().min(e.wall.as_secs_f64()))
            * scale;
        let off = (total - user - sys).max(0.0);
        let name = html(&e.name);
        let _ = write!(
            o,
            "<g class=\"bar\" data-name=\"{name}\"><title>{name}: {} wall, {} user, {} system</title>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            human(e.wall),
            human(e.usage.utime),
            human(e.usage.stime),
            label_w - 8.0,
            y + row_h / 2.0 + 4.0,
            name
        );
        let mut x = label_w;
        for (w, c) in [(user, USER), (sys, SYS), (off, OFF)] {
            if w > 0.0 {
                let _ = write!(
                    o,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{c}\"/>",
                    y + 3.0,
                    row_h - 8.0
                );
                x += w;
            }
        }
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\">{:.1} % &middot; {}</text></g>",
            x + 6.0,
            y + row_h / 2.0 + 4.0,
            percent(e.wall, p.wall),
            human(e.wall)
        );
    }
    o.push_str("</svg>\n");
}

fn table(o: &mut String, p: &Profile) {
    o.push_str("<h2>Entries</h2>\n<p class=\"meta\">Click a column to sort. A thread's calls are the slices it ran; a region's, the times it was entered; &lt;wait&gt;'s, the polls that could block.</p>\n");
    // (key, label, tooltip, numeric)
    let cols: [(&str, &str, &str, bool); 13] = [
        (
            "name",
            "name",
            "thread name, region name or pseudo-entry",
            false,
        ),
        ("kind", "kind", "thread, region, wait or scheduler", false),
        (
            "calls",
            "calls",
            "slices (threads), entries (regions), blocking polls (wait)",
            true,
        ),
        ("wall", "wall ms", "wall time charged", true),
        ("per_call", "wall/call", "wall time per call", true),
        ("user", "user ms", "CPU time in user mode (ru_utime)", true),
        ("sys", "sys ms", "CPU time in the kernel (ru_stime)", true),
        (
            "minflt",
            "minflt",
            "page faults without I/O (ru_minflt)",
            true,
        ),
        ("majflt", "majflt", "page faults with I/O (ru_majflt)", true),
        (
            "nvcsw",
            "nvcsw",
            "voluntary context switches: the OS thread blocked (ru_nvcsw)",
            true,
        ),
        (
            "nivcsw",
            "nivcsw",
            "involuntary context switches: the kernel preempted it (ru_nivcsw)",
            true,
        ),
        (
            "cpu_pct",
            "CPU %",
            "user + system time as a share of the entry's wall time",
            true,
        ),
        (
            "pct",
            "% of interval",
            "wall time as a share of the interval",
            true,
        ),
    ];
    o.push_str("<table id=\"entries\" data-sorted-by=\"wall-desc\"><thead><tr>");
    for (key, label, tip, num) in cols {
        let _ = write!(
            o,
            "<th data-key=\"{key}\" data-type=\"{}\" class=\"{}\" title=\"{tip}\">{label}</th>",
            if num { "num" } else { "text" },
            match (num, key) {
                (true, "wall") => "n desc",
                (true, _) => "n",
                _ => "",
            }
        );
    }
    o.push_str("</tr></thead><tbody>\n");
    for e in &p.entries {
        let pc = percent(e.wall, p.wall);
        let pcall = per_call(e.wall, e.calls);
        let cpu_pct = percent(e.usage.cpu(), e.wall);
        let _ = writeln!(
        o,
        "<tr><td data-v=\"{n}\">{n}</td><td data-v=\"{k}\"><span class=\"kind k-{k}\">{k}</span></td>\
             <td class=\"n\" data-v=\"{c}\">{c}</td>\
             <td class=\"n\" data-v=\"{w}\">{wms}</td>\
             <td class=\"n\" data-v=\"{pcn}\">{pch}</td>\
             <td class=\"n\" data-v=\"{u}\">{ums}</td>\
             <td class=\"n\" data-v=\"{s}\">{sms}</td>\
             <td class=\"n\" data-v=\"{mi}\">{mi}</td><td class=\"n\" data-v=\"{ma}\">{ma}</td>\
             <td class=\"n\" data-v=\"{v}\">{v}</td><td class=\"n\" data-v=\"{iv}\">{iv}</td>\
             <td class=\"n\" data-v=\"{cpu_pct:.3}\">{cpu_pct:.1}</td>\
             <td class=\"n\" data-v=\"{pc:.4}\"><span class=\"pct\" style=\"width:{bar:.0}px\"></span>{pc:.1}</td></tr>",
            n = html(&e.name),
            k = e.kind.as_str(),
            c = e.calls,
            w = e.wall.as_nanos(),
            wms = ms(e.wall),
            pcn = pcall.as_nanos(),
            pch = if e.calls == 0 { "&ndash;".to_owned() } else { human(pcall) },
            u = e.usage.utime.as_nanos(),
            ums = ms(e.usage.utime),
            s = e.usage.stime.as_nanos(),
            sms = ms(e.usage.stime),
            mi = e.usage.minflt,
            ma = e.usage.majflt,
            v = e.usage.nvcsw,
            iv = e.usage.nivcsw,
            bar = pc * 0.6,
        );
    }
    let u = &p.usage;
    let _ = writeln!(
        o,
        "</tbody><tfoot><tr><th>total</th><th></th><th class=\"n\">{}</th><th class=\"n\">{}</th><th></th>\
         <th class=\"n\">{}</th><th class=\"n\">{}</th><th class=\"n\">{}</th><th class=\"n\">{}</th>\
         <th class=\"n\">{}</th><th class=\"n\">{}</th><th class=\"n\">{:.1}</th><th class=\"n\">100.0</th></tr></tfoot></table>",
        p.entries.iter().map(|e| e.calls).sum::<u64>(),
        ms(p.wall),
        ms(u.utime),
        ms(u.stime),
        u.minflt,
        u.majflt,
        u.nvcsw,
        u.nivcsw,
        percent(u.cpu(), p.wall),
    );
}

fn warnings(o: &mut String, p: &Profile) {
    o.push_str("<h2>Latency warnings in the interval</h2>\n");
    if p.latency_warnings.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"none\" id=\"no-warnings\">None{}.</p>",
            match p.latency_threshold {
                Some(t) => format!(": no green thread ran over {} without yielding", human(t)),
                None => " (latency warnings were off in this runtime)".to_owned(),
            }
        );
        return;
    }
    o.push_str(
        "<table id=\"warnings\"><thead><tr><th>started</th><th class=\"n\">offset (s)</th>\
         <th class=\"n\">thread</th><th>name</th><th class=\"n\">ran</th><th></th></tr></thead><tbody>\n",
    );
    for w in &p.latency_warnings {
        let offset = match w.started.duration_since(p.start) {
            Ok(d) => format!("{:.3}", d.as_secs_f64()),
            Err(e) => format!("-{:.3}", e.duration().as_secs_f64()),
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">{offset}</td><td class=\"n\">#{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td>{}</td></tr>",
            utc(w.started),
            w.thread,
            html(w.name.as_deref().unwrap_or("<unnamed>")),
            human(w.ran),
            if w.running { "still running" } else { "" }
        );
    }
    o.push_str("</tbody></table>\n");
}
