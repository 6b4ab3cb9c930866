//! Metrics for Prometheus: counters the relay keeps as it works, and an
//! opt-in HTTP endpoint (`--metrics ADDR`, `GET /metrics`) served by green
//! threads of the relay, in the OpenMetrics text format that Prometheus
//! scrapes.
//!
//! The format and the metric types come from `prometheus-client`, the
//! Prometheus project's own Rust client. The HTTP side is a dozen lines
//! here: one request per connection, `GET /metrics` only, bounded in size
//! and time, so no HTTP framework is pulled in for it.
//!
//! ```text
//! mail_relay_sessions                    sessions now
//! mail_relay_sessions_accepted_total     sessions started
//! mail_relay_messages_accepted_total     messages queued (250 after DATA)
//! mail_relay_recipients_delivered_total  per recipient: sent
//! mail_relay_recipients_deferred_total   per recipient: deferred
//! mail_relay_recipients_bounced_total    per recipient: bounced (or dropped, for <>)
//! mail_relay_queue_messages              messages in the queue now
//! mail_relay_queue_oldest_age_seconds    age of the oldest of them (0 when empty)
//! mail_relay_delivery_delay_seconds      histogram: arrival to delivery, per recipient sent
//! coro_switches_total, coro_latency_warnings_total, coro_threads, ...
//!                                        the runtime's own counters (coro::stats())
//! ```

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use coro::net::{TcpListener, TcpStream};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::queue::Queue;

/// The relay's metrics (one set per process).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Sessions started.
    pub sessions_accepted: Counter,
    /// Messages queued (a 250 after DATA).
    pub accepted: Counter,
    /// Recipients delivered.
    pub delivered: Counter,
    /// Recipients deferred (per attempt).
    pub deferred: Counter,
    /// Recipients bounced.
    pub bounced: Counter,
    /// Arrival to delivery, per recipient sent, in seconds.
    pub delay: Histogram,
    sessions: Gauge,
    queue: Gauge,
    oldest: Gauge<f64, AtomicU64>,
    runtime: Runtime,
}

/// The runtime's counters, as of the last scrape.
#[derive(Debug, Default)]
struct Runtime {
    switches: Counter,
    latency_warnings: Counter,
    spawned: Counter,
    polls: Counter,
    threads: Gauge,
    ready: Gauge,
    timers: Gauge,
    blocking_threads: Gauge,
    blocking_queued: Gauge,
    /// Cumulative values already added to the counters above.
    last: std::sync::Mutex<[u64; 4]>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn get() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            sessions_accepted: Counter::default(),
            accepted: Counter::default(),
            delivered: Counter::default(),
            deferred: Counter::default(),
            bounced: Counter::default(),
            // 10 ms to about 45 h.
            delay: Histogram::new(exponential_buckets(0.01, 4.0, 12)),
            sessions: Gauge::default(),
            queue: Gauge::default(),
            oldest: Gauge::default(),
            runtime: Runtime::default(),
        };
        let r = &mut m.registry;
        let mr = r.sub_registry_with_prefix("mail_relay");
        mr.register("sessions", "SMTP sessions now", m.sessions.clone());
        mr.register(
            "sessions_accepted",
            "SMTP sessions started",
            m.sessions_accepted.clone(),
        );
        mr.register(
            "messages_accepted",
            "Messages queued (250 after DATA)",
            m.accepted.clone(),
        );
        mr.register(
            "recipients_delivered",
            "Recipients delivered",
            m.delivered.clone(),
        );
        mr.register(
            "recipients_deferred",
            "Recipients deferred, per attempt",
            m.deferred.clone(),
        );
        mr.register(
            "recipients_bounced",
            "Recipients bounced (or dropped, for the null sender)",
            m.bounced.clone(),
        );
        mr.register("queue_messages", "Messages in the queue", m.queue.clone());
        mr.register(
            "queue_oldest_age_seconds",
            "Age of the oldest message in the queue (0 when empty)",
            m.oldest.clone(),
        );
        mr.register(
            "delivery_delay_seconds",
            "From arrival to delivery, per recipient delivered",
            m.delay.clone(),
        );
        let rt = &m.runtime;
        let cr = m.registry.sub_registry_with_prefix("coro");
        cr.register("switches", "Green thread resumes", rt.switches.clone());
        cr.register(
            "latency_warnings",
            "Green threads that ran past the latency threshold",
            rt.latency_warnings.clone(),
        );
        cr.register("spawned", "Green threads spawned", rt.spawned.clone());
        cr.register("polls", "Calls into the OS poller", rt.polls.clone());
        cr.register("threads", "Green threads alive", rt.threads.clone());
        cr.register("ready", "Green threads ready to run", rt.ready.clone());
        cr.register("timers", "Pending timers", rt.timers.clone());
        cr.register(
            "blocking_threads",
            "OS threads of the blocking pool",
            rt.blocking_threads.clone(),
        );
        cr.register(
            "blocking_queued",
            "Blocking jobs waiting for a thread",
            rt.blocking_queued.clone(),
        );
        m
    }

    /// The text a scrape gets: the gauges sampled now (`sessions` live
    /// sessions, the queue), then every metric.
    pub fn render(&self, sessions: usize, queue: &Queue) -> String {
        self.sessions.set(sessions as i64);
        self.queue.set(queue.len() as i64);
        let oldest = queue.oldest_arrival().map_or(0.0, |t| age(t).as_secs_f64());
        self.oldest.set(oldest);
        let s = coro::stats();
        let rt = &self.runtime;
        {
            let mut last = rt.last.lock().unwrap_or_else(|p| p.into_inner());
            let now = [s.switches, s.latency_warnings, s.spawned, s.polls];
            let counters = [&rt.switches, &rt.latency_warnings, &rt.spawned, &rt.polls];
            for ((c, n), l) in counters.into_iter().zip(now).zip(last.iter_mut()) {
                c.inc_by(n.saturating_sub(*l));
                *l = n;
            }
        }
        rt.threads.set(s.live as i64);
        rt.ready.set(s.ready as i64);
        rt.timers.set(s.pending_timers as i64);
        rt.blocking_threads.set(s.blocking_threads as i64);
        rt.blocking_queued.set(s.blocking_queued as i64);
        let mut out = String::new();
        // Infallible: writing into a String.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

fn age(t: SystemTime) -> Duration {
    SystemTime::now().duration_since(t).unwrap_or_default()
}

/// The largest request we read.
const MAX_REQUEST: usize = 8 * 1024;
/// How long a scraper may take to send its request and read the answer.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `GET /metrics` on `listener` until it is closed: one green
/// thread per connection; `sessions` says how many sessions are live.
pub fn serve(listener: Rc<TcpListener>, queue: Queue, sessions: Rc<dyn Fn() -> usize>) {
    loop {
        let (stream, _) = match listener.accept() {
            Ok(c) => c,
            Err(_) if listener.is_closed() => return,
            Err(e) if coro::WaitError::from_io(&e).is_some() => return,
            Err(e) => {
                log::warn!("metrics: accept: {e}");
                if coro::sleep(Duration::from_millis(100)).is_err() {
                    return;
                }
                continue;
            }
        };
        let (queue, sessions) = (queue.clone(), sessions.clone());
        let spawned = coro::Builder::new()
            .name("metrics scrape".into())
            .spawn(move || {
                let r = crate::wire::timed(SCRAPE_TIMEOUT, || answer(stream, &queue, &*sessions));
                if let Err(e) = r {
                    log::debug!("metrics: {e}");
                }
            });
        if let Err(e) = spawned {
            log::warn!("metrics: cannot start a thread for a scrape: {e}");
        }
    }
}

/// Reads one request and answers it.
fn answer(mut s: TcpStream, queue: &Queue, sessions: &dyn Fn() -> usize) -> io::Result<()> {
    let mut req = Vec::new();
    let mut buf = [0; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        req.extend_from_slice(&buf[..n]);
        if req.len() > MAX_REQUEST {
            return respond(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if method != b"GET" {
        return respond(&mut s, "405 Method Not Allowed", "text/plain", "GET only\n");
    }
    if path != b"/metrics" {
        return respond(&mut s, "404 Not Found", "text/plain", "see /metrics\n");
    }
    let body = get().render(sessions(), queue);
    respond(
        &mut s,
        "200 OK",
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
        &body,
    )
}

fn respond(s: &mut TcpStream, status: &str, kind: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())?;
    s.flush()
}

/// Binds the metrics listener (before anything touches the disk, like the
/// SMTP one).
///
/// # Errors
///
/// If the address cannot be bound, named.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("metrics {addr}: {e}")))
}
