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
//! # Limits
//!
//! The endpoint is for a scraper or two, and must never take from SMTP
//! what it needs (file descriptors above all): at most
//! [`MAX_CONNECTIONS`] connections are served at once and
//! [`MAX_PER_CLIENT`] from one address; a connection beyond them is
//! closed as soon as it is accepted. A request must arrive within
//! [`REQUEST_TIMEOUT`], so idle connections go fast. An accept that fails
//! (the open-file limit reached) backs off, doubling to 1 s, and its
//! warning is logged at most once a minute.
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

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
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
/// Connections served at once; one more is closed when accepted.
pub const MAX_CONNECTIONS: usize = 16;
/// Connections served at once from one client address.
pub const MAX_PER_CLIENT: usize = 4;
/// How long a scraper may take to send its whole request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a scraper may take to read the answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The connections being served, in all and per client address.
#[derive(Debug, Default)]
struct Served {
    all: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// A connection's place among those served; given back when dropped.
struct Place {
    served: Rc<RefCell<Served>>,
    ip: IpAddr,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut s = self.served.borrow_mut();
        s.all -= 1;
        if let Some(n) = s.per_client.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                s.per_client.remove(&self.ip);
            }
        }
    }
}

/// A place for a connection from `ip`, if the limits leave one.
fn admit(served: &Rc<RefCell<Served>>, ip: IpAddr) -> Option<Place> {
    let mut s = served.borrow_mut();
    let mine = s.per_client.get(&ip).copied().unwrap_or(0);
    if s.all >= MAX_CONNECTIONS || mine >= MAX_PER_CLIENT {
        return None;
    }
    s.all += 1;
    *s.per_client.entry(ip).or_insert(0) += 1;
    Some(Place {
        served: served.clone(),
        ip,
    })
}

/// Serves `GET /metrics` on `listener` until it is closed: one green
/// thread per connection, within the limits (see the module docs);
/// `sessions` says how many sessions are live.
pub fn serve(listener: Rc<TcpListener>, queue: Queue, sessions: Rc<dyn Fn() -> usize>) {
    const MIN_BACKOFF: Duration = Duration::from_millis(5);
    let served = Rc::new(RefCell::new(Served::default()));
    let mut backoff = MIN_BACKOFF;
    let mut failing = crate::logger::Throttled::new(Duration::from_secs(60));
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(_) if listener.is_closed() => return,
            Err(e) if coro::WaitError::from_io(&e).is_some() => return,
            Err(e) => {
                failing.warn(&format!("metrics: accept: {e}; backing off"));
                if coro::sleep(backoff).is_err() {
                    return;
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = MIN_BACKOFF;
        let Some(place) = admit(&served, peer.ip()) else {
            log::debug!("metrics: connection from {peer} closed: too many at once");
            stream.close();
            continue;
        };
        let (queue, sessions) = (queue.clone(), sessions.clone());
        let spawned = coro::Builder::new()
            .name("metrics scrape".into())
            .spawn(move || {
                let _place = place;
                if let Err(e) = answer(stream, &queue, &*sessions) {
                    log::debug!("metrics: {peer}: {e}");
                }
            });
        if let Err(e) = spawned {
            failing.warn(&format!("metrics: cannot start a thread for a scrape: {e}"));
        }
    }
}

/// Reads one request (within [`REQUEST_TIMEOUT`]) and answers it (within
/// `ANSWER_TIMEOUT`).
fn answer(mut s: TcpStream, queue: &Queue, sessions: &dyn Fn() -> usize) -> io::Result<()> {
    let req = crate::wire::timed(REQUEST_TIMEOUT, || read_request(&mut s))?;
    let Some(req) = req else { return Ok(()) };
    crate::wire::timed(ANSWER_TIMEOUT, || respond_to(&mut s, &req, queue, sessions))
}

/// The request's head; `None` when the client closed first.
fn read_request(s: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut req = Vec::new();
    let mut buf = [0; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        req.extend_from_slice(&buf[..n]);
        if req.len() > MAX_REQUEST {
            break;
        }
    }
    Ok(Some(req))
}

/// Answers the request `req`.
fn respond_to(
    s: &mut TcpStream,
    req: &[u8],
    queue: &Queue,
    sessions: &dyn Fn() -> usize,
) -> io::Result<()> {
    if req.len() > MAX_REQUEST {
        return respond(s, "431 Request Header Fields Too Large", "text/plain", "");
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if method != b"GET" {
        return respond(s, "405 Method Not Allowed", "text/plain", "GET only\n");
    }
    if path != b"/metrics" {
        return respond(s, "404 Not Found", "text/plain", "see /metrics\n");
    }
    let body = get().render(sessions(), queue);
    respond(
        s,
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
