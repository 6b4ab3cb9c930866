//! One connection to an upstream, written for coro in plain blocking
//! style: opening it (connect, greeting, EHLO with a HELO fallback,
//! STARTTLS by policy, EHLO again), mail transactions on it, and QUIT.
//!
//! # A transaction
//!
//! With PIPELINING (RFC 2920) the envelope goes in one write, led by RSET
//! when the connection carried a message before:
//!
//! ```text
//! C: RSET / MAIL FROM:<s> SIZE=n BODY=8BITMIME / RCPT TO:<a> / RCPT TO:<b> / DATA
//! S: 250 / 250 / 250 / 550 / 354
//! C: <dot-stuffed content> .
//! S: 250
//! ```
//!
//! Without it the same commands go one at a time. Every wait has its own
//! timeout (Postfix's `smtp_*_timeout`); the caller wraps the whole in one
//! more (`message_timeout`). Any I/O error, timeout, malformed reply or
//! 421 marks the connection broken: it is never used again.
//!
//! # Replies are taken strictly
//!
//! Each reply must fit the command it answers (RFC 5321 §4.3.2): 2xx, 4xx
//! or 5xx, and for DATA only 354 lets the content go (a 250 to DATA never
//! saw the message, so it is no delivery). A reply that does not fit
//! ends the transaction (its recipients are deferred, 4.5.0) and breaks
//! the connection, so the next transaction cannot inherit a reply that
//! was meant for another command. So does a server that speaks out of
//! turn: octets already waiting when we are about to send a command (or
//! the content) were sent before the server read it, an "early talker"
//! lining up canned replies. Only the replies to a pipelined group may
//! arrive together, and only from a server that announced PIPELINING
//! (without it, commands go one at a time and each reply is read before
//! the next command).
//!
//! Before a word is sent, the content is checked against what the server
//! announced: 8-bit content to a server without 8BITMIME is deferred (it
//! would be corrupted in transit, and converting it is not our business),
//! a message over the server's SIZE is bounced.

use std::fmt;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coro::net::TcpStream;

pub use super::error::{SmtpError, Stage};
use super::reply::{Assembler, Reply, MAX_LINE};
use crate::config::{Smtp as SmtpConfig, TlsLevel};
use crate::delivery::route::Upstream;
use crate::delivery::{Detail, Handoff, Status};
use crate::spool::{Content, Stored, CHUNK};
use crate::stream::{connect_tls, Stream};
use crate::wire::timed;

/// What the client needs besides the upstream.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `[smtp]` table.
    pub cfg: SmtpConfig,
    /// The name we give in EHLO/HELO.
    pub helo_name: String,
    /// rustls's client configuration, unless TLS is off.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The configuration that verifies certificates against the trusted
    /// roots, for connections that must (MTA-STS); unset when MTA-STS is
    /// off.
    pub verified_tls: Option<Arc<rustls::ClientConfig>>,
}

/// What the server announced in its EHLO reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extensions {
    /// EHLO worked (not HELO).
    pub esmtp: bool,
    /// RFC 2920.
    pub pipelining: bool,
    /// RFC 1870: the fixed limit, if the server gave one above 0.
    pub size: Option<u64>,
    /// RFC 6152.
    pub eight_bit: bool,
    /// RFC 6531.
    pub smtputf8: bool,
    /// RFC 3207.
    pub starttls: bool,
    /// RFC 3461.
    pub dsn: bool,
}

impl Extensions {
    /// The keywords of an EHLO reply (its lines after the first).
    fn parse(reply: &Reply) -> Extensions {
        let mut e = Extensions {
            esmtp: true,
            ..Extensions::default()
        };
        for line in reply.lines.iter().skip(1) {
            let mut words = line.split_ascii_whitespace();
            let Some(kw) = words.next() else { continue };
            match kw.to_ascii_uppercase().as_str() {
                "PIPELINING" => e.pipelining = true,
                "SIZE" => e.size = words.next().and_then(|n| n.parse().ok()).filter(|&n| n > 0),
                "8BITMIME" => e.eight_bit = true,
                "SMTPUTF8" => e.smtputf8 = true,
                "STARTTLS" => e.starttls = true,
                "DSN" => e.dsn = true,
                _ => {}
            }
        }
        e
    }
}

/// How a new connection uses TLS.
#[derive(Debug, Clone, Copy)]
enum Tls<'a> {
    /// Not at all.
    Off,
    /// As `[smtp] tls_security_level` says.
    ByLevel,
    /// Required, with a certificate valid for this name.
    VerifiedFor(&'a str),
}

/// A transaction's end.
#[derive(Debug)]
pub enum Delivery {
    /// Every recipient has a status (the connection may be broken).
    Done(Vec<Status>),
    /// A reused connection was found dead before anything was said about
    /// the message: try it on a fresh connection.
    Stale(SmtpError),
}

/// Read buffer size.
const READ_CHUNK: usize = 8 * 1024;

/// An open connection to an upstream.
pub struct Client {
    stream: Stream,
    rbuf: Vec<u8>,
    rpos: usize,
    replies: Assembler,
    /// `host[ip]:port`, for the log.
    pub peer: String,
    /// The upstream's host, for a bounce's `Remote-MTA`.
    pub host: String,
    /// What the server announced (after STARTTLS, what it announced then).
    pub ext: Extensions,
    /// Transactions begun on this connection.
    pub uses: u64,
    /// When it was opened.
    pub opened: Instant,
    /// An I/O error, a timeout, a malformed reply or a 421 was seen: the
    /// connection must not be used again.
    pub broken: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("peer", &self.peer)
            .field("tls", &self.stream.is_tls())
            .field("uses", &self.uses)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to `up`, reads the greeting, says EHLO (or HELO) and, by
    /// the TLS policy and unless `plain`, runs STARTTLS.
    ///
    /// # Errors
    ///
    /// Why the connection could not be made ready for mail.
    pub fn open(up: &Upstream, s: &Settings, plain: bool) -> Result<Client, SmtpError> {
        Client::open_with(up, s, if plain { Tls::Off } else { Tls::ByLevel })
    }

    /// As [`open`](Client::open), but STARTTLS is required and the
    /// certificate must be valid for `name` (an MX host name under an
    /// MTA-STS policy), checked against [`Settings::verified_tls`]'s roots.
    ///
    /// # Errors
    ///
    /// As [`open`](Client::open); no STARTTLS, or a certificate that does
    /// not verify, is [`SmtpError::Tls`] (4.7.5).
    pub fn open_verified(up: &Upstream, s: &Settings, name: &str) -> Result<Client, SmtpError> {
        Client::open_with(up, s, Tls::VerifiedFor(name))
    }

    fn open_with(up: &Upstream, s: &Settings, tls: Tls<'_>) -> Result<Client, SmtpError> {
        let target = up.to_string();
        let cfg = &s.cfg;
        let tcp =
            timed(cfg.connect_timeout, || TcpStream::connect(target.as_str())).map_err(|err| {
                SmtpError::Connect {
                    peer: target.clone(),
                    err,
                }
            })?;
        let _ = tcp.set_nodelay(true);
        let peer = match tcp.peer_addr() {
            Ok(a) => format!("{}[{}]:{}", up.host, a.ip(), a.port()),
            Err(_) => target,
        };
        let mut c = Client {
            stream: Stream::Plain(tcp),
            rbuf: Vec::with_capacity(READ_CHUNK),
            rpos: 0,
            replies: Assembler::default(),
            peer,
            host: up.host.clone(),
            ext: Extensions::default(),
            uses: 0,
            opened: Instant::now(),
            broken: false,
        };
        let greeting = c.read_reply(Stage::Greeting, cfg.helo_timeout)?;
        if greeting.class() != 2 {
            return Err(c.refused(Stage::Greeting, greeting));
        }
        c.hello(s)?;
        let level = cfg.tls_security_level;
        let (tls, required, name) = match tls {
            Tls::Off => return Ok(c),
            Tls::ByLevel => match s.tls.clone().filter(|_| level != TlsLevel::None) {
                Some(t) => (
                    t,
                    matches!(level, TlsLevel::Encrypt | TlsLevel::Verify),
                    None,
                ),
                None => return Ok(c),
            },
            Tls::VerifiedFor(name) => match s.verified_tls.clone() {
                Some(t) => (t, true, Some(name)),
                None => {
                    return Err(SmtpError::Tls {
                        what: format!("no trusted roots to verify {name} with"),
                    })
                }
            },
        };
        if !c.ext.starttls {
            if required {
                return Err(SmtpError::Tls {
                    what: format!("TLS is required, but was not offered by host {}", c.peer),
                });
            }
            return Ok(c);
        }
        c.send(b"STARTTLS\r\n", Stage::StartTls, cfg.starttls_timeout)?;
        let r = c.read_reply(Stage::StartTls, cfg.starttls_timeout)?;
        if r.code != 220 && !matches!(r.class(), 4 | 5) {
            // Neither go-ahead nor refusal: the replies are out of step.
            return Err(c.unexpected(Stage::StartTls, &r));
        }
        if r.code != 220 {
            if required {
                return Err(c.refused(Stage::StartTls, r));
            }
            log::info!("{}: STARTTLS refused ({r}); going on in plain text", c.peer);
            return Ok(c);
        }
        c.start_tls(tls, s, name)
    }

    /// The handshake after STARTTLS's 220, then EHLO again (RFC 3207 §4.2).
    /// The certificate is checked for `name`, else for the upstream's host.
    fn start_tls(
        self,
        tls: Arc<rustls::ClientConfig>,
        s: &Settings,
        name: Option<&str>,
    ) -> Result<Client, SmtpError> {
        let Client {
            stream, peer, host, ..
        } = self;
        let Stream::Plain(tcp) = stream else {
            return Err(SmtpError::Tls {
                what: format!("TLS already active with {peer}"),
            });
        };
        let failed = |e: &dyn fmt::Display| SmtpError::Tls {
            what: format!("TLS handshake with {peer} failed: {e}"),
        };
        let name = match crate::tls::server_name(name.unwrap_or(&host)) {
            Ok(n) => n,
            Err(e) => return Err(failed(&e)),
        };
        let stream = timed(s.cfg.starttls_timeout, || connect_tls(tcp, tls, name))
            .map_err(|e| failed(&e))?;
        log::info!(
            "TLS connection established to {peer}: {}",
            stream.tls_info().unwrap_or_default()
        );
        let mut c = Client {
            stream,
            rbuf: Vec::with_capacity(READ_CHUNK),
            rpos: 0,
            replies: Assembler::default(),
            peer,
            host,
            ext: Extensions::default(),
            uses: 0,
            opened: Instant::now(),
            broken: false,
        };
        c.hello(s)?;
        Ok(c)
    }

    /// Whether the connection runs TLS.
    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// EHLO, or HELO when EHLO is refused with 5xx.
    fn hello(&mut self, s: &Settings) -> Result<(), SmtpError> {
        let t = s.cfg.helo_timeout;
        self.send(
            format!("EHLO {}\r\n", s.helo_name).as_bytes(),
            Stage::Ehlo,
            t,
        )?;
        let r = self.read_reply(Stage::Ehlo, t)?;
        if r.class() == 2 {
            self.ext = Extensions::parse(&r);
            return Ok(());
        }
        if r.class() != 5 {
            return Err(self.refused(Stage::Ehlo, r));
        }
        self.send(
            format!("HELO {}\r\n", s.helo_name).as_bytes(),
            Stage::Helo,
            t,
        )?;
        let r = self.read_reply(Stage::Helo, t)?;
        if r.class() != 2 {
            return Err(self.refused(Stage::Helo, r));
        }
        self.ext = Extensions::default();
        Ok(())
    }

    fn refused(&mut self, stage: Stage, reply: Reply) -> SmtpError {
        SmtpError::Refused {
            peer: self.peer.clone(),
            stage,
            reply,
        }
    }

    /// Writes a command (or a pipelined group, or the start of the
    /// content) under `timeout`, after checking that the server has said
    /// nothing we have not read: whatever it sent before reading what we
    /// are about to send was not an answer to it. An error breaks the
    /// connection.
    fn send(&mut self, bytes: &[u8], stage: Stage, timeout: Duration) -> Result<(), SmtpError> {
        let early = self.rbuf.len() - self.rpos;
        if early > 0 {
            return Err(self.protocol(
                stage,
                format!(
                    "{early} octets arrived before this was sent, unasked (the server \
                     speaks out of turn)"
                ),
            ));
        }
        self.write_raw(bytes, stage, timeout)
    }

    /// Writes `bytes` under `timeout`; an error breaks the connection.
    fn write_raw(
        &mut self,
        bytes: &[u8],
        stage: Stage,
        timeout: Duration,
    ) -> Result<(), SmtpError> {
        let stream = &mut self.stream;
        timed(timeout, || {
            stream.write_all(bytes)?;
            stream.flush()
        })
        .map_err(|err| {
            self.broken = true;
            SmtpError::Io {
                peer: self.peer.clone(),
                stage,
                err,
            }
        })
    }

    /// Reads one reply, waiting at most `timeout` for each read.
    fn read_reply(&mut self, stage: Stage, timeout: Duration) -> Result<Reply, SmtpError> {
        loop {
            if let Some(i) = self.rbuf[self.rpos..].iter().position(|&b| b == b'\n') {
                let line = &self.rbuf[self.rpos..self.rpos + i];
                self.rpos += i + 1;
                match self.replies.push(line) {
                    Ok(Some(r)) => {
                        if r.closing() {
                            self.broken = true;
                        }
                        return Ok(r);
                    }
                    Ok(None) => continue,
                    Err(what) => return Err(self.protocol(stage, what)),
                }
            }
            if self.rbuf.len() - self.rpos > MAX_LINE {
                return Err(self.protocol(stage, format!("a reply line over {MAX_LINE} octets")));
            }
            if self.rpos > 0 {
                self.rbuf.drain(..self.rpos);
                self.rpos = 0;
            }
            let len = self.rbuf.len();
            self.rbuf.resize(len + READ_CHUNK, 0);
            let (stream, buf) = (&mut self.stream, &mut self.rbuf[len..]);
            let r = timed(timeout, || stream.read(buf));
            let n = *r.as_ref().unwrap_or(&0);
            self.rbuf.truncate(len + n);
            let err = match r {
                Ok(0) => io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"),
                Ok(_) => continue,
                Err(e) => e,
            };
            self.broken = true;
            return Err(SmtpError::Io {
                peer: self.peer.clone(),
                stage,
                err,
            });
        }
    }

    fn protocol(&mut self, stage: Stage, what: String) -> SmtpError {
        self.broken = true;
        SmtpError::Protocol {
            peer: self.peer.clone(),
            stage,
            what,
        }
    }

    /// The status a reply gives the recipients it is about (a reply that
    /// passed [`fits`](Client::fits)).
    fn status(&self, stage: Stage, reply: &Reply) -> Status {
        let detail = |text: String| Detail {
            dsn: reply.dsn(),
            text,
            reply: Some(reply.to_string()),
            remote: Some(self.host.clone()),
        };
        let said = || {
            format!(
                "host {} said: {reply} (in reply to {} command)",
                self.peer,
                stage.command()
            )
        };
        // With DSN, the request went with the message: the next hop tells
        // of the delivery; without, we say it was relayed.
        let handoff = if self.ext.dsn {
            Handoff::PassedOn
        } else {
            Handoff::Relayed
        };
        match reply.class() {
            2 => Status::Sent(detail(reply.to_string()), handoff),
            5 => Status::Bounced(detail(said())),
            4 => Status::Deferred(detail(said())),
            _ => Status::Deferred(Detail {
                dsn: "4.5.0".into(),
                ..detail(format!("unexpected reply: {}", said()))
            }),
        }
    }

    /// Checks `msg` against what the server announced: `Some` status for
    /// every recipient when it must not be sent here.
    fn precheck(&self, msg: &Stored, rcpts: &[&str], eight_bit: bool) -> Option<Status> {
        let peer = &self.peer;
        if eight_bit && !self.ext.eight_bit {
            return Some(Status::Deferred(Detail::local(
                "4.6.3",
                format!(
                    "message has 8-bit content, but host {peer} does not announce 8BITMIME; \
                     not sent, so as not to corrupt it"
                ),
            )));
        }
        let needs_utf8 = !msg.env.from.is_ascii() || rcpts.iter().any(|r| !r.is_ascii());
        if needs_utf8 && !self.ext.smtputf8 {
            return Some(Status::Deferred(Detail::local(
                "4.6.7",
                format!("message needs SMTPUTF8, but host {peer} does not announce it"),
            )));
        }
        match self.ext.size {
            Some(limit) if msg.content.len() > limit => Some(Status::Bounced(Detail {
                dsn: "5.3.4".into(),
                text: format!(
                    "message size {} exceeds size limit {limit} of server {peer}",
                    msg.content.len()
                ),
                reply: None,
                remote: Some(self.host.clone()),
            })),
            _ => None,
        }
    }

    /// Sends `msg` to its recipients `rcpts` (indices into its envelope):
    /// RSET first if the connection was used before, pipelined when the
    /// server allows it, with the DSN parameters when it announces DSN.
    pub fn deliver(&mut self, msg: &Stored, rcpts: &[usize], s: &Settings) -> Delivery {
        let eight_bit = msg.env.eight_bit || msg.env.has_8bit;
        let addresses: Vec<&str> = rcpts.iter().map(|&i| msg.env.rcpts[i].as_str()).collect();
        if let Some(st) = self.precheck(msg, &addresses, eight_bit) {
            return Delivery::Done(vec![st; rcpts.len()]);
        }
        let reuse = self.uses > 0;
        self.uses += 1;
        let mut mail = format!("MAIL FROM:<{}>", msg.env.from);
        if self.ext.size.is_some() {
            mail.push_str(&format!(" SIZE={}", msg.content.len()));
        }
        if eight_bit && self.ext.eight_bit {
            mail.push_str(" BODY=8BITMIME");
        }
        if msg.env.smtputf8 && self.ext.smtputf8 {
            mail.push_str(" SMTPUTF8");
        }
        let dsn = &msg.env.dsn;
        if self.ext.dsn {
            mail.push_str(&dsn.mail_params());
        }
        mail.push_str("\r\n");
        let rcpt_cmds: Vec<String> = rcpts
            .iter()
            .zip(&addresses)
            .map(|(&i, a)| {
                let params = if self.ext.dsn {
                    dsn.rcpt_params(i)
                } else {
                    String::new()
                };
                format!("RCPT TO:<{a}>{params}\r\n")
            })
            .collect();
        let mut txn = Txn {
            statuses: vec![None; rcpts.len()],
            accepted: Vec::new(),
        };
        let r = if self.ext.pipelining {
            self.envelope_pipelined(&mail, &rcpt_cmds, reuse, &mut txn, s)
        } else {
            self.envelope_in_turn(&mail, &rcpt_cmds, reuse, &mut txn, s)
        };
        match r {
            Ok(true) => {
                let t = &s.cfg;
                let r = self
                    .send_body(&msg.content, t.data_xfer_timeout)
                    .map_err(Broke::Lost)
                    .and_then(|()| self.reply(Stage::Dot, t.data_done_timeout));
                let st = match r {
                    Ok(reply) => self.status(Stage::Dot, &reply),
                    Err(Broke::Lost(e) | Broke::Stale(e)) => {
                        Status::Deferred(e.detail(Some(&self.host)))
                    }
                };
                for &i in &txn.accepted {
                    txn.statuses[i] = Some(st.clone());
                }
            }
            Ok(false) => {}
            Err(Broke::Stale(e)) => return Delivery::Stale(e),
            Err(Broke::Lost(e)) => {
                let st = Status::Deferred(e.detail(Some(&self.host)));
                for i in txn.accepted.iter().copied() {
                    txn.statuses[i] = Some(st.clone());
                }
                for s in txn.statuses.iter_mut().filter(|s| s.is_none()) {
                    *s = Some(st.clone());
                }
            }
        }
        let unasked = self.rbuf.len() - self.rpos;
        if unasked > 0 && !self.broken {
            // More than the transaction's replies: the next transaction
            // would take them for its own.
            log::info!(
                "{}: {unasked} octets after the last reply of a transaction, unasked; \
                 not reusing the connection",
                self.peer
            );
            self.broken = true;
        }
        Delivery::Done(
            txn.statuses
                .into_iter()
                .map(|s| {
                    s.unwrap_or_else(|| {
                        Status::Deferred(Detail::local("4.5.0", "no reply for this recipient"))
                    })
                })
                .collect(),
        )
    }

    /// RSET, MAIL, RCPTs (`rcpts`: each command with its CRLF) and DATA in
    /// one write, then their replies. `Ok(true)`: go on with the content.
    fn envelope_pipelined(
        &mut self,
        mail: &str,
        rcpts: &[String],
        reuse: bool,
        txn: &mut Txn,
        s: &Settings,
    ) -> Result<bool, Broke> {
        let t = &s.cfg;
        let mut out =
            String::with_capacity(64 + mail.len() + rcpts.iter().map(String::len).sum::<usize>());
        if reuse {
            out.push_str("RSET\r\n");
        }
        out.push_str(mail);
        for r in rcpts {
            out.push_str(r);
        }
        out.push_str("DATA\r\n");
        let first = if reuse { Stage::Rset } else { Stage::Mail };
        self.send(out.as_bytes(), first, t.mail_timeout)
            .map_err(|e| Broke::first(e, reuse))?;
        if reuse {
            self.rset_reply(t.rset_timeout)?;
        }
        let mail = self.reply(Stage::Mail, t.mail_timeout)?;
        for i in 0..rcpts.len() {
            let r = self.reply(Stage::Rcpt, t.rcpt_timeout)?;
            if mail.class() == 2 {
                self.rcpt_reply(i, &r, txn);
            }
        }
        let data = self.reply(Stage::Data, t.data_init_timeout)?;
        if mail.class() != 2 {
            self.mail_refused(&mail, txn);
        }
        if data.code == 354 && txn.accepted.is_empty() {
            // A server that says 354 with no recipient: end the empty data.
            self.send(b".\r\n", Stage::Dot, t.data_done_timeout)
                .map_err(Broke::Lost)?;
            self.reply(Stage::Dot, t.data_done_timeout)?;
            return Ok(false);
        }
        Ok(self.data_reply(&data, txn))
    }

    /// The same, one command at a time.
    fn envelope_in_turn(
        &mut self,
        mail: &str,
        rcpts: &[String],
        reuse: bool,
        txn: &mut Txn,
        s: &Settings,
    ) -> Result<bool, Broke> {
        let t = &s.cfg;
        if reuse {
            self.send(b"RSET\r\n", Stage::Rset, t.rset_timeout)
                .map_err(|e| Broke::first(e, true))?;
            self.rset_reply(t.rset_timeout)?;
        }
        let r = self.exchange(mail.as_bytes(), Stage::Mail, t.mail_timeout)?;
        if r.class() != 2 {
            self.mail_refused(&r, txn);
            return Ok(false);
        }
        for (i, cmd) in rcpts.iter().enumerate() {
            let r = self.exchange(cmd.as_bytes(), Stage::Rcpt, t.rcpt_timeout)?;
            self.rcpt_reply(i, &r, txn);
        }
        if txn.accepted.is_empty() {
            return Ok(false);
        }
        let r = self.exchange(b"DATA\r\n", Stage::Data, t.data_init_timeout)?;
        Ok(self.data_reply(&r, txn))
    }

    /// Sends a command and reads its reply, which must fit it; a broken
    /// connection is lost.
    fn exchange(&mut self, cmd: &[u8], stage: Stage, timeout: Duration) -> Result<Reply, Broke> {
        self.send(cmd, stage, timeout).map_err(Broke::Lost)?;
        self.reply(stage, timeout)
    }

    /// Reads the reply to `stage`'s command; one that does not fit it
    /// breaks the connection.
    fn reply(&mut self, stage: Stage, timeout: Duration) -> Result<Reply, Broke> {
        let r = self.read_reply(stage, timeout).map_err(Broke::Lost)?;
        if Client::fits(stage, &r) {
            Ok(r)
        } else {
            Err(Broke::Lost(self.unexpected(stage, &r)))
        }
    }

    /// Whether `r` can answer `stage`'s command: 2xx, 4xx or 5xx; for
    /// DATA, 354, 4xx or 5xx (RFC 5321 §4.3.2: only 354 starts the
    /// content, and a 2xx to DATA never saw it).
    fn fits(stage: Stage, r: &Reply) -> bool {
        match stage {
            Stage::Data => r.code == 354 || matches!(r.class(), 4 | 5),
            _ => matches!(r.class(), 2 | 4 | 5),
        }
    }

    /// A reply that does not fit its command: the connection is broken
    /// (the replies may be out of step with the commands from here on).
    fn unexpected(&mut self, stage: Stage, r: &Reply) -> SmtpError {
        self.protocol(
            stage,
            format!("unexpected reply {r} to {}", stage.command()),
        )
    }

    /// MAIL's refusal is every recipient's status.
    fn mail_refused(&self, r: &Reply, txn: &mut Txn) {
        let st = self.status(Stage::Mail, r);
        txn.statuses.iter_mut().for_each(|s| *s = Some(st.clone()));
        txn.accepted.clear();
    }

    /// The reply to RSET on a reused connection: a dead connection is
    /// stale, anything but 2xx breaks it.
    fn rset_reply(&mut self, timeout: Duration) -> Result<(), Broke> {
        match self.read_reply(Stage::Rset, timeout) {
            Ok(r) if r.class() == 2 => Ok(()),
            Ok(r) => {
                self.broken = true;
                Err(Broke::Lost(self.refused(Stage::Rset, r)))
            }
            Err(e) => Err(Broke::first(e, true)),
        }
    }

    fn rcpt_reply(&self, i: usize, r: &Reply, txn: &mut Txn) {
        if r.class() == 2 {
            txn.accepted.push(i);
        } else {
            txn.statuses[i] = Some(self.status(Stage::Rcpt, r));
        }
    }

    /// DATA's reply (one that fits): 354 goes on, a 4xx or 5xx is the
    /// accepted recipients' status.
    fn data_reply(&self, r: &Reply, txn: &mut Txn) -> bool {
        if r.code == 354 {
            return !txn.accepted.is_empty();
        }
        let st = self.status(Stage::Data, r);
        for &i in &txn.accepted {
            txn.statuses[i] = Some(st.clone());
        }
        txn.accepted.clear();
        false
    }

    /// Writes the content dot-stuffed (RFC 5321 §4.5.2) and the final
    /// dot, a chunk at a time as it is read from the spool; nothing may
    /// have come from the server between its 354 and the content. A
    /// content that cannot be read breaks the connection before the dot,
    /// so the server drops what it got.
    fn send_body(&mut self, content: &Content, timeout: Duration) -> Result<(), SmtpError> {
        let mut reader = content.reader();
        let mut stuffer = Stuffer::default();
        let mut out = Vec::with_capacity(CHUNK.min(content.len() as usize) + 64);
        let mut first = true;
        loop {
            let chunk = match reader.next() {
                Ok(c) => c,
                Err(err) => {
                    self.broken = true;
                    return Err(SmtpError::Spool { err });
                }
            };
            if let Some(chunk) = chunk {
                stuffer.stuff(chunk, &mut out);
            }
            let last = reader.is_done();
            if last {
                stuffer.end(&mut out);
            }
            if first {
                self.send(&out, Stage::Body, timeout)?;
                first = false;
            } else {
                self.write_raw(&out, Stage::Body, timeout)?;
            }
            if last {
                return Ok(());
            }
            out.clear();
        }
    }

    /// Says QUIT (without waiting for the reply, as Postfix's
    /// `smtp_skip_quit_response`) and closes. A broken connection is just
    /// closed.
    pub fn quit(mut self, timeout: Duration) {
        if !self.broken {
            let stream = &mut self.stream;
            let _ = timed(timeout, || {
                stream.write_all(b"QUIT\r\n")?;
                stream.close_notify();
                stream.flush()
            });
        }
        self.stream.tcp().close();
    }
}

/// A transaction's recipients as the replies come.
struct Txn {
    /// Each recipient's status once known.
    statuses: Vec<Option<Status>>,
    /// Recipients the server took with 2xx, waiting for the data's reply.
    accepted: Vec<usize>,
}

/// Why an envelope could not be completed.
enum Broke {
    /// The first exchange on a reused connection failed: it was dead.
    Stale(SmtpError),
    /// The connection broke mid-transaction.
    Lost(SmtpError),
}

impl Broke {
    /// An error at the first exchange: stale on a reused connection.
    fn first(e: SmtpError, reuse: bool) -> Broke {
        if reuse && e.is_io() {
            Broke::Stale(e)
        } else {
            Broke::Lost(e)
        }
    }
}

/// Dot-stuffing (RFC 5321 §4.5.2) over content that comes in chunks: a
/// `.` that begins a line gets another before it; the end adds a CRLF if
/// the content lacks one, and the final dot.
#[derive(Debug)]
pub struct Stuffer {
    /// The next octet begins a line.
    line_start: bool,
    /// The content so far ends in CRLF (or is empty).
    ends_crlf: bool,
    /// The content so far ends in CR.
    cr: bool,
}

impl Default for Stuffer {
    fn default() -> Stuffer {
        Stuffer {
            line_start: true,
            ends_crlf: true,
            cr: false,
        }
    }
}

impl Stuffer {
    /// Appends `data`, stuffed, to `out`.
    pub fn stuff(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if data.is_empty() {
            return;
        }
        let mut from = 0;
        if self.line_start && data[0] == b'.' {
            out.push(b'.');
        }
        for i in 0..data.len().saturating_sub(1) {
            if data[i] == b'\n' && data[i + 1] == b'.' {
                out.extend_from_slice(&data[from..=i]);
                out.push(b'.');
                from = i + 1;
            }
        }
        out.extend_from_slice(&data[from..]);
        let last = data[data.len() - 1];
        self.line_start = last == b'\n';
        self.ends_crlf = last == b'\n'
            && (self.cr && data.len() == 1 || data.len() >= 2 && data[data.len() - 2] == b'\r');
        self.cr = last == b'\r';
    }

    /// Appends the end of the content: a CRLF if it lacks one, and the
    /// final dot.
    pub fn end(&mut self, out: &mut Vec<u8>) {
        if !self.ends_crlf {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b".\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_stuffing_across_chunks() {
        let cases: [(&[u8], &[u8]); 4] = [
            (
                b".a\r\nb\r\n..c\r\n.\r\nd.e\r\n",
                b"..a\r\nb\r\n...c\r\n..\r\nd.e\r\n.\r\n",
            ),
            (b"no end", b"no end\r\n.\r\n"),
            (b"cr end\r", b"cr end\r\r\n.\r\n"),
            (b"", b".\r\n"),
        ];
        for (data, want) in cases {
            for cut in 0..=data.len() {
                let mut s = Stuffer::default();
                let mut out = Vec::new();
                s.stuff(&data[..cut], &mut out);
                s.stuff(&data[cut..], &mut out);
                s.end(&mut out);
                assert_eq!(
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(want),
                    "cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn only_replies_that_fit_their_command() {
        let r = |code: u16| Reply {
            code,
            lines: vec![String::new()],
        };
        for stage in [Stage::Mail, Stage::Rcpt, Stage::Rset, Stage::Dot] {
            for (code, fits) in [
                (250, true),
                (451, true),
                (550, true),
                (354, false),
                (199, false),
            ] {
                assert_eq!(Client::fits(stage, &r(code)), fits, "{stage:?} {code}");
            }
        }
        for (code, fits) in [
            (354, true),
            (451, true),
            (554, true),
            (250, false),
            (334, false),
        ] {
            assert_eq!(Client::fits(Stage::Data, &r(code)), fits, "DATA {code}");
        }
    }

    #[test]
    fn ehlo_keywords() {
        let r = Reply {
            code: 250,
            lines: [
                "mx",
                "PIPELINING",
                "SIZE 1000",
                "8bitmime",
                "STARTTLS",
                "DSN",
                "",
            ]
            .map(String::from)
            .to_vec(),
        };
        let e = Extensions::parse(&r);
        assert!(e.esmtp && e.pipelining && e.eight_bit && e.starttls && e.dsn && !e.smtputf8);
        assert_eq!(e.size, Some(1000));
        let r = Reply {
            code: 250,
            lines: ["mx", "SIZE 0", "SIZE"].map(String::from).to_vec(),
        };
        assert_eq!(Extensions::parse(&r).size, None, "SIZE 0 is no limit");
    }
}
