//! Finding a CPU hog with coro's three tools: latency warnings, the back
//! door and the profiler.
//!
//! A small TCP service has two ports: `api` answers `PING` with `PONG` (the
//! latency-sensitive clients), `upload` takes a JSON document and parses it.
//! The parse is a tight loop that never yields, so while it runs every
//! `api` client waits. The program generates its own load (OS threads with
//! plain `std::net` clients: eight pinging, one uploading) and, through its
//! own back door, starts the profiler, lists the threads by run time mid-run,
//! and dumps the profile at the end. Then it prints the `api` clients'
//! latency percentiles.
//!
//! ```text
//! cargo run --release --example latency_profile            # the hog
//! cargo run --release --example latency_profile -- --fixed # the parse yields every 128 values
//! cargo run --release --example latency_profile -- --both  # both, and the two p99s side by side
//! ```
//!
//! The hog run shows latency warnings naming the `upload` thread while it
//! parses, `threads run` with `upload` on top, and a profile whose report
//! (`cargo run --release -p coro-profile -- report DIR/profile-hog.jsonl`,
//! the command is printed) puts the time in the `parse` region. With
//! `--fixed` there are no warnings and the `api` p99 drops to a few
//! milliseconds. Options: `--secs N` (run length per phase, default 6),
//! `--body-kb N` (upload size, default 32768: about 200 ms of parsing on
//! the machine of BENCHMARKS.md), `--latency-ms N` (the warning threshold,
//! default 100 ms, half the runtime's default), `--dir DIR` (where the back door
//! socket and the profiles go; default a new private directory under the
//! system's temp directory).
//!
//! While it runs you can look in yourself: `socat -
//! UNIX-CONNECT:DIR/backdoor-hog`, then `threads run`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use coro::net::{backdoor, TcpListener, TcpStream};

/// What the command line asked for.
#[derive(Debug, Clone)]
struct Options {
    fixed: bool,
    both: bool,
    secs: u64,
    body_kb: usize,
    latency_ms: u64,
    dir: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        fixed: false,
        both: false,
        secs: 6,
        body_kb: 32 * 1024,
        latency_ms: 100,
        dir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> Result<u64, String> {
            let v = args.next().ok_or(format!("{what} needs a number"))?;
            v.parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{what} needs a number above zero, not {v:?}"))
        };
        match a.as_str() {
            "--fixed" => o.fixed = true,
            "--both" => o.both = true,
            "--secs" => o.secs = num("--secs")?,
            "--body-kb" => o.body_kb = num("--body-kb")? as usize,
            "--latency-ms" => o.latency_ms = num("--latency-ms")?,
            "--dir" => o.dir = Some(args.next().ok_or("--dir needs a directory")?.into()),
            other => return Err(format!("unknown option {other:?} (see the file's header)")),
        }
    }
    Ok(o)
}

/// What one phase measured.
#[derive(Debug)]
struct Outcome {
    /// `api` round-trip times, sorted.
    latencies: Vec<Duration>,
    uploads: u64,
    warnings: u64,
    profile: PathBuf,
}

impl Outcome {
    fn pct(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 * p).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[i - 1]
    }
}

fn main() -> io::Result<()> {
    let opts = options().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    coro_examples::log_to_stderr();
    let dir = match &opts.dir {
        Some(d) => d.clone(),
        None => {
            let d =
                std::env::temp_dir().join(format!("coro-latency-profile-{}", std::process::id()));
            std::fs::DirBuilder::new().mode(0o700).create(&d)?;
            d
        }
    };
    let phases: &[bool] = if opts.both {
        &[false, true]
    } else if opts.fixed {
        &[true]
    } else {
        &[false]
    };
    let mut results = Vec::new();
    for &fixed in phases {
        let name = if fixed { "fixed" } else { "hog" };
        println!(
            "== {name}: {} s of load, {} KiB uploads",
            opts.secs, opts.body_kb
        );
        let o = opts.clone();
        let d = dir.clone();
        let mut rt = coro::Runtime::builder()
            .latency_warning(Some(Duration::from_millis(opts.latency_ms)))
            .build()?;
        let out = rt.block_on(move || server(&o, &d, fixed))?;
        println!(
            "{name}: api requests {}, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; uploads {}; latency warnings {}",
            out.latencies.len(),
            ms(out.pct(0.50)),
            ms(out.pct(0.99)),
            ms(out.pct(1.0)),
            out.uploads,
            out.warnings
        );
        println!(
            "{name}: profile in {}; make the report with\n  cargo run --release -p coro-profile -- report {} -o {}",
            out.profile.display(),
            out.profile.display(),
            out.profile.with_extension("html").display()
        );
        results.push((name, out));
    }
    if let [(_, hog), (_, fixed)] = &results[..] {
        println!(
            "p99 of the api clients: hog {:.2} ms, fixed {:.2} ms ({:.0}x lower); latency warnings: {} vs {}",
            ms(hog.pct(0.99)),
            ms(fixed.pct(0.99)),
            ms(hog.pct(0.99)) / ms(fixed.pct(0.99)).max(1e-3),
            hog.warnings,
            fixed.warnings
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One phase: the service on green threads, the load on OS threads.
fn server(opts: &Options, dir: &Path, fixed: bool) -> io::Result<Outcome> {
    let tag = if fixed { "fixed" } else { "hog" };
    let api = Rc::new(TcpListener::bind("127.0.0.1:0")?);
    let upload = Rc::new(TcpListener::bind("127.0.0.1:0")?);
    let door = backdoor::serve(dir.join(format!("backdoor-{tag}")))?;
    let (api_addr, upload_addr) = (api.local_addr()?, upload.local_addr()?);
    accept("api", api.clone(), serve_api)?;
    accept("upload", upload.clone(), move |s| serve_upload(s, fixed))?;

    let load = Load {
        api: api_addr,
        upload: upload_addr,
        door: door.path().to_owned(),
        profile: dir.join(format!("profile-{tag}.jsonl")),
        run: Duration::from_secs(opts.secs),
        body: body(opts.body_kb * 1024),
    };
    let profile = load.profile.clone();
    let (latencies, uploads) = coro::blocking(move || load.run())??;
    let warnings = coro::stats().latency_warnings;
    api.close();
    upload.close();
    door.close();
    Ok(Outcome {
        latencies,
        uploads,
        warnings,
        profile,
    })
}

/// Accepts connections on `l`, one green thread named `name` each.
fn accept(
    name: &'static str,
    l: Rc<TcpListener>,
    handler: impl Fn(TcpStream) -> io::Result<()> + Clone + 'static,
) -> io::Result<()> {
    coro::Builder::new()
        .name(format!("{name}-acceptor"))
        .spawn(move || {
            while let Ok((s, _)) = l.accept() {
                let h = handler.clone();
                let _ = coro::Builder::new().name(name.into()).spawn(move || h(s));
            }
        })?;
    Ok(())
}

/// `PING` → `PONG`, until the client leaves.
fn serve_api(s: TcpStream) -> io::Result<()> {
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    while r.read_line(&mut line)? > 0 {
        (&s).write_all(b"PONG\n")?;
        line.clear();
    }
    Ok(())
}

/// `UPLOAD <bytes>` and the document → `OK <what it adds up to>`.
fn serve_upload(s: TcpStream, fixed: bool) -> io::Result<()> {
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    while r.read_line(&mut line)? > 0 {
        let len: usize = line
            .strip_prefix("UPLOAD ")
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "expected UPLOAD <bytes>"))?;
        let mut body = vec![0; len];
        coro::profile::region("read_body", || r.read_exact(&mut body))?;
        let reply = match coro::profile::region("parse", || summarize(&body, fixed)) {
            Ok(s) => format!(
                "OK {} records, {} active, {} tags, {:.2} total\n",
                s.records,
                s.active,
                s.tags.len(),
                s.price
            ),
            Err(e) => format!("ERR {e}\n"),
        };
        (&s).write_all(reply.as_bytes())?;
        line.clear();
    }
    Ok(())
}

/// A JSON array of `n` bytes or so of product records.
fn body(n: usize) -> Vec<u8> {
    let mut b = b"[".to_vec();
    let mut i = 0u64;
    while b.len() < n {
        if i > 0 {
            b.push(b',');
        }
        let _ = write!(
            b,
            "{{\"id\":{i},\"name\":\"item \\\"{i}\\\"\",\"tags\":[\"t{}\",\"t{}\"],\"price\":{}.25,\"active\":{}}}",
            i % 50,
            i % 7,
            i % 1000,
            !i.is_multiple_of(3)
        );
        i += 1;
    }
    b.push(b']');
    b
}

/// Values the fixed parser parses between two yields (a few microseconds).
///
/// Small on purpose: while a thread keeps yielding, the scheduler polls
/// for I/O every 256 resumes (see `coro`'s scheduler docs), so the other
/// clients' requests wait up to 256 of these slices.
const YIELD_EVERY: u64 = 128;

/// A parsed JSON value.
#[derive(Debug)]
enum Value {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

/// What an upload's records add up to.
#[derive(Debug, Default)]
struct Summary {
    records: usize,
    active: usize,
    tags: std::collections::HashSet<String>,
    price: f64,
}

/// Parses the document, an array of records, one record at a time (each
/// into a small tree, then totalled and dropped). With `fixed`, the parser
/// yields every [`YIELD_EVERY`] values.
fn summarize(doc: &[u8], fixed: bool) -> Result<Summary, String> {
    let mut p = Parser {
        b: doc,
        i: 0,
        values: 0,
        fixed,
    };
    let mut sum = Summary::default();
    p.eat(b'[')?;
    p.ws();
    if p.b.get(p.i) == Some(&b']') {
        return Ok(sum);
    }
    loop {
        sum.add(p.value()?);
        p.ws();
        match p.b.get(p.i) {
            Some(b',') => p.i += 1,
            Some(b']') => return Ok(sum),
            _ => return Err(format!("expected ',' or ']' at byte {}", p.i)),
        }
    }
}

impl Summary {
    fn add(&mut self, record: Value) {
        let Value::Obj(fields) = record else {
            return;
        };
        self.records += 1;
        for (k, v) in fields {
            match (k.as_str(), v) {
                ("price", Value::Num(n)) => self.price += n,
                ("active", Value::Bool(true)) => self.active += 1,
                ("tags", Value::Arr(tags)) => {
                    for t in tags {
                        if let Value::Str(t) = t {
                            self.tags.insert(t);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    values: u64,
    fixed: bool,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.values += 1;
        if self.fixed && self.values.is_multiple_of(YIELD_EVERY) {
            coro::yield_now(); // the fix: let the other threads run
        }
        self.ws();
        match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Obj(fields));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.eat(b':')?;
                    fields.push((k, self.value()?));
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Obj(fields));
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Arr(items));
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => self.string().map(Value::Str),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(_) => {
                let start = self.i;
                while self
                    .b
                    .get(self.i)
                    .is_some_and(|c| matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                {
                    self.i += 1;
                }
                std::str::from_utf8(&self.b[start..self.i])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .map(Value::Num)
                    .ok_or_else(|| format!("bad value at byte {start}"))
            }
            None => Err("unexpected end of the document".into()),
        }
    }

    fn word(&mut self, w: &str, v: Value) -> Result<Value, String> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(format!("bad literal at byte {}", self.i))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut s = String::new();
        loop {
            match self.b.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(s);
                }
                Some(b'\\') => {
                    let c = *self.b.get(self.i + 1).ok_or("unterminated escape")?;
                    s.push(match c {
                        b'n' => '\n',
                        b't' => '\t',
                        c => c as char,
                    });
                    self.i += 2;
                }
                Some(&c) => {
                    s.push(c as char);
                    self.i += 1;
                }
                None => return Err("unterminated string".into()),
            }
        }
    }
}

/// The load generator and the operator: plain OS threads with `std` sockets.
struct Load {
    api: std::net::SocketAddr,
    upload: std::net::SocketAddr,
    door: PathBuf,
    profile: PathBuf,
    run: Duration,
    body: Vec<u8>,
}

impl Load {
    /// Runs the clients for `run`; returns the `api` latencies (sorted) and
    /// the uploads done.
    fn run(self) -> io::Result<(Vec<Duration>, u64)> {
        let end = Instant::now() + self.run;
        let pingers: Vec<_> = (0..8)
            .map(|_| {
                let addr = self.api;
                std::thread::spawn(move || -> io::Result<Vec<Duration>> {
                    let s = std::net::TcpStream::connect(addr)?;
                    s.set_nodelay(true)?;
                    let mut r = BufReader::new(&s);
                    let mut lat = Vec::new();
                    let mut line = String::new();
                    while Instant::now() < end {
                        let t = Instant::now();
                        (&s).write_all(b"PING\n")?;
                        line.clear();
                        r.read_line(&mut line)?;
                        lat.push(t.elapsed());
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Ok(lat)
                })
            })
            .collect();
        let (addr, body) = (self.upload, self.body);
        let uploader = std::thread::spawn(move || -> io::Result<u64> {
            let s = std::net::TcpStream::connect(addr)?;
            let mut r = BufReader::new(&s);
            let mut n = 0;
            let mut line = String::new();
            std::thread::sleep(Duration::from_millis(200));
            while Instant::now() < end {
                writeln!(&s, "UPLOAD {}", body.len())?;
                (&s).write_all(&body)?;
                line.clear();
                r.read_line(&mut line)?;
                if !line.starts_with("OK ") {
                    return Err(io::Error::other(format!("upload failed: {line}")));
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
            Ok(n)
        });
        // The operator, at the back door.
        let mut door = Console::connect(&self.door)?;
        door.run("profile start")?;
        std::thread::sleep(self.run / 2);
        println!(
            "back door `threads run 6` mid-run:\n{}",
            door.run("threads run 6")?
        );
        let uploads = uploader.join().expect("uploader panicked")?;
        let mut lat = Vec::new();
        for p in pingers {
            lat.extend(p.join().expect("pinger panicked")?);
        }
        let stopped = door.run("profile stop")?;
        println!("back door `profile stop`:\n{stopped}");
        door.run(&format!("profile dump {}", self.profile.display()))?;
        door.run("quit")?;
        lat.sort();
        Ok((lat, uploads))
    }
}

/// A back door client: sends a line, returns the output up to the next
/// prompt.
struct Console {
    r: BufReader<StdUnixStream>,
}

impl Console {
    fn connect(path: &Path) -> io::Result<Console> {
        let s = StdUnixStream::connect(path)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut c = Console {
            r: BufReader::new(s),
        };
        c.until_prompt()?; // the greeting
        Ok(c)
    }

    fn run(&mut self, cmd: &str) -> io::Result<String> {
        writeln!(self.r.get_ref(), "{cmd}")?;
        let out = self.until_prompt()?;
        if let Some(e) = out.lines().find(|l| l.starts_with("error: ")) {
            return Err(io::Error::other(format!("back door `{cmd}`: {e}")));
        }
        Ok(out)
    }

    /// Reads up to a `> ` prompt at the start of a line (or the end).
    fn until_prompt(&mut self) -> io::Result<String> {
        let mut out = Vec::new();
        let mut byte = [0u8];
        loop {
            if self.r.read(&mut byte)? == 0 {
                break;
            }
            out.push(byte[0]);
            if out.ends_with(b"> ") && (out.len() == 2 || out[out.len() - 3] == b'\n') {
                out.truncate(out.len() - 2);
                break;
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}
