//! The report's timeline: the flight recorder's spans at the end of the
//! interval ([`Profile::timeline`]) drawn as one row per green thread (its
//! resumes) and one for the scheduler (its polls and waits), in SVG. Each
//! span has a tooltip (thread, start, length, how it ended); spans the
//! latency watchdog reported are red.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use coro_profile::{Profile, Slice};

use crate::fmt::{html, human};

/// Rows drawn: the scheduler and the threads with the most run time.
const ROWS: usize = 24;

const RUN: &str = "#3b6fd4";
const HOG: &str = "#d43b3b";
const WAIT: &str = "#c9ced8";
const POLL: &str = "#e0a030";

pub fn timeline(o: &mut String, p: &Profile) {
    o.push_str("<h2>Timeline (flight recorder)</h2>\n");
    if p.timeline.is_empty() {
        o.push_str("<p class=\"none\">No flight-recorder events in this interval.</p>\n");
        return;
    }
    let first = p.timeline.iter().map(|s| s.start).min().unwrap_or_default();
    let last = p
        .timeline
        .iter()
        .map(|s| s.start + s.dur)
        .max()
        .unwrap_or_default();
    let span = (last - first).max(Duration::from_nanos(1));
    // Rows: the scheduler first, then threads by run time.
    let mut run: BTreeMap<u64, (Duration, &str)> = BTreeMap::new();
    for s in p.timeline.iter().filter(|s| s.track != 0) {
        let e = run.entry(s.track).or_insert((Duration::ZERO, &s.name));
        e.0 += s.dur;
    }
    let mut tracks: Vec<(u64, Duration, &str)> =
        run.into_iter().map(|(id, (d, n))| (id, d, n)).collect();
    tracks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let hidden = tracks.len().saturating_sub(ROWS - 1);
    tracks.truncate(ROWS - 1);
    let mut rows: Vec<(u64, String)> = vec![(0, "scheduler".to_owned())];
    rows.extend(tracks.iter().map(|(id, _, n)| (*id, (*n).to_owned())));

    let (label_w, plot_w, row_h, axis_h) = (190.0, 900.0, 22.0, 24.0);
    let width = label_w + plot_w + 60.0;
    let height = axis_h + row_h * rows.len() as f64 + 6.0;
    let x_of = |d: Duration| label_w + (d - first).as_secs_f64() / span.as_secs_f64() * plot_w;
    let _ = writeln!(
        o,
        "<p class=\"legend\">The last {} events of the interval ({} of wall time), one row per green thread{}:\
         <span style=\"background:{RUN}\"></span>running\
         <span style=\"background:{HOG}\"></span>running past the latency threshold\
         <span style=\"background:{WAIT}\"></span>scheduler waiting for events\
         <span style=\"background:{POLL}\"></span>polling. Hover a span for details; \
         the back door's <code>trace dump PATH</code> writes the same events for Perfetto.</p>",
        p.timeline.len(),
        human(span),
        if hidden > 0 {
            format!(" ({hidden} threads with less run time not shown)")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        o,
        "<svg id=\"timeline\" role=\"img\" aria-label=\"timeline of green threads\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\">"
    );
    // Axis: five ticks.
    for i in 0..=4 {
        let x = label_w + plot_w * i as f64 / 4.0;
        let at = span.mul_f64(i as f64 / 4.0);
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{axis_h}\" x2=\"{x:.1}\" y2=\"{height}\" stroke=\"#eceef3\"/>\
             <text x=\"{x:.1}\" y=\"14\" text-anchor=\"middle\">+{}</text>",
            human(at)
        );
    }
    let row_of: BTreeMap<u64, usize> = rows.iter().enumerate().map(|(i, r)| (r.0, i)).collect();
    for (i, (_, name)) in rows.iter().enumerate() {
        let y = axis_h + row_h * i as f64;
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            label_w - 8.0,
            y + row_h / 2.0 + 4.0,
            html(name)
        );
    }
    for s in &p.timeline {
        let Some(&row) = row_of.get(&s.track) else {
            continue;
        };
        span_rect(
            o,
            s,
            x_of(s.start),
            x_of(s.start + s.dur),
            axis_h + row_h * row as f64,
            row_h,
        );
    }
    o.push_str("</svg>\n");
}

fn span_rect(o: &mut String, s: &Slice, x0: f64, x1: f64, y: f64, row_h: f64) {
    let color = if s.latency_warning {
        HOG
    } else if s.track != 0 {
        RUN
    } else if s.name == "wait" {
        WAIT
    } else {
        POLL
    };
    let w = (x1 - x0).max(1.0);
    let _ = write!(
        o,
        "<rect class=\"span{}\" x=\"{x0:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{color}\">\
         <title>{}: {} at +{}, then {}</title></rect>",
        if s.latency_warning { " hog" } else { "" },
        y + 3.0,
        row_h - 6.0,
        html(&s.name),
        human(s.dur),
        human(s.start),
        html(&s.what)
    );
    o.push('\n');
}
