//! A synchronous library on green threads, unchanged: an SMTP-like line
//! protocol written only against `std::io` (`BufRead::read_line`,
//! `BufWriter`, `write!`, `flush`), with no mention of coro, runs over
//! `coro::net::TcpStream` (`BufReader<&TcpStream>`, `BufWriter<&TcpStream>`)
//! on both ends, with several sessions at once and messages larger than the
//! socket buffers, so reads and writes suspend in the middle of std's
//! buffered calls. A timeout in the middle of a line reaches the library as
//! `ErrorKind::TimedOut` and loses no byte.

mod util;

use std::cell::RefCell;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use coro::sync::Event;
use util::{run, LONG};

// ---------------------------------------------------------------------------
// The "library": plain std::io, no coro.

/// A message the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mail {
    helo: String,
    from: String,
    to: Vec<String>,
    body: String,
}

/// Serves one SMTP-like session until `QUIT` or EOF; delivers each
/// message to `deliver`.
fn smtp_server(
    mut r: impl BufRead,
    w: impl Write,
    mut deliver: impl FnMut(Mail) -> usize,
) -> io::Result<()> {
    let mut w = BufWriter::new(w);
    let reply = |w: &mut BufWriter<_>, text: &str| -> io::Result<()> {
        write!(w, "{text}\r\n")?;
        w.flush()
    };
    reply(&mut w, "220 coro-test ready")?;
    let mut helo = None;
    let mut from = None;
    let mut to = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                reply(&mut w, "500 line is not UTF-8")?;
                continue;
            }
            Err(e) => return Err(e),
        }
        let cmd = line.trim_end_matches(['\r', '\n']);
        let upper = cmd.to_ascii_uppercase();
        if let Some(name) = upper.strip_prefix("HELO ") {
            helo = Some(name.to_ascii_lowercase());
            reply(&mut w, &format!("250 Hello {}", &cmd[5..]))?;
        } else if helo.is_none() && upper != "QUIT" {
            reply(&mut w, "503 bad sequence of commands: HELO first")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = Some(cmd[10..].to_owned());
            to.clear();
            reply(&mut w, "250 OK")?;
        } else if upper.starts_with("RCPT TO:") && from.is_some() {
            to.push(cmd[8..].to_owned());
            reply(&mut w, "250 OK")?;
        } else if upper == "DATA" && !to.is_empty() {
            reply(&mut w, "354 End data with <CR><LF>.<CR><LF>")?;
            let mut body = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line)? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed in DATA",
                    ));
                }
                if line == ".\r\n" {
                    break;
                }
                // Undo dot-stuffing.
                body.push_str(line.strip_prefix('.').unwrap_or(&line));
            }
            let id = deliver(Mail {
                helo: helo.clone().unwrap_or_default(),
                from: from.take().unwrap_or_default(),
                to: std::mem::take(&mut to),
                body,
            });
            reply(&mut w, &format!("250 OK: queued as {id}"))?;
        } else if upper == "QUIT" {
            return reply(&mut w, "221 Bye");
        } else {
            reply(&mut w, &format!("500 unrecognised command: {cmd}"))?;
        }
    }
}

/// Client side: sends `cmd` (if any), flushes, and reads one reply line.
fn command(r: &mut impl BufRead, w: &mut impl Write, cmd: Option<&str>) -> io::Result<String> {
    if let Some(cmd) = cmd {
        write!(w, "{cmd}\r\n")?;
    }
    w.flush()?;
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "no reply"));
    }
    Ok(line.trim_end().to_owned())
}

/// Sends one message in a whole session; returns the queue id.
fn smtp_send(mut r: impl BufRead, w: impl Write, mail: &Mail) -> io::Result<String> {
    let mut w = BufWriter::new(w);
    let mut expect = |cmd: Option<&str>, code: &str, w: &mut BufWriter<_>| {
        let reply = command(&mut r, w, cmd)?;
        if reply.starts_with(code) {
            Ok(reply)
        } else {
            Err(io::Error::other(format!(
                "{cmd:?}: expected {code}, got {reply:?}"
            )))
        }
    };
    expect(None, "220", &mut w)?;
    expect(Some(&format!("HELO {}", mail.helo)), "250", &mut w)?;
    expect(Some(&format!("MAIL FROM:{}", mail.from)), "250", &mut w)?;
    for to in &mail.to {
        expect(Some(&format!("RCPT TO:{to}")), "250", &mut w)?;
    }
    expect(Some("DATA"), "354", &mut w)?;
    for line in mail.body.split_inclusive("\r\n") {
        if line.starts_with('.') {
            w.write_all(b".")?; // dot-stuffing
        }
        w.write_all(line.as_bytes())?;
    }
    w.write_all(b".\r\n")?;
    let queued = expect(None, "250", &mut w)?;
    expect(Some("QUIT"), "221", &mut w)?;
    Ok(queued["250 OK: queued as ".len()..].to_owned())
}

// ---------------------------------------------------------------------------
// The same code on green threads.

/// Starts an accept loop serving `sessions` sessions, each on its own green
/// thread; returns the address and the mailbox.
#[allow(clippy::type_complexity)]
fn start_server(
    sessions: usize,
) -> io::Result<(
    std::net::SocketAddr,
    Rc<RefCell<Vec<Mail>>>,
    coro::JoinHandle<io::Result<()>>,
)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let mailbox = Rc::new(RefCell::new(Vec::new()));
    let mb = mailbox.clone();
    let server = coro::spawn(move || -> io::Result<()> {
        let handlers: Vec<_> = (0..sessions)
            .map(|_| {
                let (stream, _) = listener.accept()?;
                let mb = mb.clone();
                Ok(coro::spawn(move || {
                    smtp_server(BufReader::new(&stream), &stream, |m| {
                        mb.borrow_mut().push(m);
                        mb.borrow().len()
                    })
                }))
            })
            .collect::<io::Result<_>>()?;
        for h in handlers {
            h.join().map_err(|e| io::Error::other(e.to_string()))??;
        }
        Ok(())
    });
    Ok((addr, mailbox, server))
}

fn mail(i: usize, body_lines: usize) -> Mail {
    let mut body = String::new();
    for n in 0..body_lines {
        // Every seventh line starts with a dot, to be stuffed and unstuffed.
        let dot = if n % 7 == 0 { "." } else { "" };
        body.push_str(&format!(
            "{dot}message {i} line {n}: {}\r\n",
            "x".repeat(n % 50)
        ));
    }
    Mail {
        helo: format!("client{i}.test"),
        from: format!("<sender{i}@test>"),
        to: vec![format!("<rcpt{i}@test>"), "<postmaster@test>".to_owned()],
        body,
    }
}

#[test]
fn one_session_over_bufreader_and_bufwriter() -> io::Result<()> {
    run(|| {
        let (addr, mailbox, server) = start_server(1)?;
        let m = mail(0, 20);
        let stream = TcpStream::connect(addr)?;
        let id = smtp_send(BufReader::new(&stream), &stream, &m)?;
        assert_eq!(id, "1");
        server.join().expect("server")?;
        assert_eq!(*mailbox.borrow(), [m]);
        Ok(())
    })
}

/// Eight sessions at once, each with a message of over 1 MiB, sent in
/// `BufWriter`'s 8 KiB writes: the writers are forced to yield (selfishness)
/// or wait for room in the middle of `write_all`, and the readers wait in
/// the middle of `read_line`, so the sessions interleave. Every message
/// arrives intact.
#[test]
fn concurrent_sessions_with_large_messages() -> io::Result<()> {
    const SESSIONS: usize = 8;
    run(|| {
        let (addr, mailbox, server) = start_server(SESSIONS)?;
        let clients: Vec<_> = (0..SESSIONS)
            .map(|i| {
                coro::spawn(move || -> io::Result<Mail> {
                    let m = mail(i, 25_000);
                    let stream = TcpStream::connect(addr)?;
                    smtp_send(BufReader::new(&stream), &stream, &m)?;
                    Ok(m)
                })
            })
            .collect();
        let mut sent = Vec::new();
        for c in clients {
            sent.push(c.join().expect("client")?);
        }
        server.join().expect("server")?;
        let mut got = mailbox.borrow().clone();
        got.sort_by(|a, b| a.helo.cmp(&b.helo));
        assert!(sent[0].body.len() > 1 << 20);
        assert_eq!(got, sent);
        // The sessions took turns inside std's buffered calls.
        assert!(coro::stats().forced_yields > 0);
        Ok(())
    })
}

/// Unknown commands, commands out of order and a line that is not UTF-8
/// each get an error reply that names the problem, and the session goes on.
#[test]
fn malformed_lines_get_error_replies_and_the_session_goes_on() -> io::Result<()> {
    run(|| {
        let (addr, mailbox, server) = start_server(1)?;
        let stream = TcpStream::connect(addr)?;
        let mut r = BufReader::new(&stream);
        let mut w = &stream;
        assert!(command(&mut r, &mut w, None)?.starts_with("220"));
        assert_eq!(
            command(&mut r, &mut w, Some("MAIL FROM:<a@test>"))?,
            "503 bad sequence of commands: HELO first"
        );
        assert_eq!(command(&mut r, &mut w, Some("HELO x"))?, "250 Hello x");
        assert_eq!(
            command(&mut r, &mut w, Some("FROB"))?,
            "500 unrecognised command: FROB"
        );
        w.write_all(b"\xff\xfe bad\r\n")?;
        assert_eq!(command(&mut r, &mut w, None)?, "500 line is not UTF-8");
        assert_eq!(command(&mut r, &mut w, Some("QUIT"))?, "221 Bye");
        server.join().expect("server")?;
        assert!(mailbox.borrow().is_empty());
        Ok(())
    })
}

/// The peer sends half a line and stops. The reader's `read_line` under a
/// short `with_timeout` fails with `ErrorKind::TimedOut` (not
/// `Interrupted`, which std would retry, nor `WouldBlock`); the half line
/// stays in the `String`, and the next `read_line` completes it.
#[test]
fn a_timeout_in_the_middle_of_a_line_loses_nothing() -> io::Result<()> {
    const SHORT: Duration = Duration::from_millis(20);
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let client = TcpStream::connect(listener.local_addr()?)?;
        let (server, _) = listener.accept()?;
        let timed_out = Rc::new(Event::new());
        let t = timed_out.clone();
        let writer = coro::spawn(move || -> io::Result<()> {
            (&client).write_all(b"HEL")?;
            t.wait()?;
            (&client).write_all(b"O me\r\n")
        });
        let mut r = BufReader::new(&server);
        let mut line = String::new();
        let mut first = None;
        let scope = coro::with_timeout(SHORT, || {
            first = r.read_line(&mut line).err().map(|e| e.kind());
        });
        assert!(scope.is_err(), "the deadline passed");
        assert_eq!(first, Some(io::ErrorKind::TimedOut));
        assert_eq!(line, "HEL", "the half line is kept");
        timed_out.set();
        coro::with_timeout(LONG, || r.read_line(&mut line)).expect("no timeout")?;
        assert_eq!(line, "HELO me\r\n");
        writer.join().expect("writer")?;
        Ok(())
    })
}
