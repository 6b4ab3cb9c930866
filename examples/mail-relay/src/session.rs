//! One SMTP session on its own green thread (RFC 5321 with PIPELINING,
//! SIZE, 8BITMIME, ENHANCEDSTATUSCODES, DSN, SMTPUTF8 and STARTTLS), written in
//! plain blocking style: read a command, answer it. On the submission
//! ports the session also takes AUTH and sends mail only for its user
//! ([`auth`]).
//!
//! # Strictness
//!
//! What real MTAs learned the hard way is enforced, not repaired: a bare
//! LF or bare CR anywhere ends the session with 521 (SMTP smuggling needs
//! one of them); command lines over 512 octets get 500 and text lines over
//! 1 000 fail the message; the only end of data is CRLF.CRLF; plaintext
//! pipelined after STARTTLS is discarded; commands out of order get 503
//! (after a failed MAIL, the pipelined RCPTs and DATA too); after
//! `error_limit` rejected commands the session ends with 421.
//!
//! # Waiting
//!
//! Every wait for the client runs under a deadline with the class of
//! RFC 5321 §4.5.3.2 that fits the state (see [`crate::config::Timeouts`]),
//! and the commit after the final dot under `final_dot`, so a slow or
//! silent client holds only this green thread. A command line has one
//! deadline for all of it, and a DATA block one that grows only by
//! `1 / min_data_rate` s per octet received: a client dripping a byte at a
//! time is cut off as soon as a silent one. Near `max_sessions` every
//! timeout shortens to `timeouts.stress` ([`Relay::timeout`]). At a
//! graceful stop the server interrupts sessions that wait between
//! transactions at once and the others at the deadline; an interrupted
//! session says 421 and ends (saying so when the back door, not a stop,
//! interrupted it).
//!
//! # DATA
//!
//! The content goes through [`Body`]: line limits, the header scan, and
//! past 64 KiB a spill file in the spool, so a session holds a bounded
//! part of its message. A message with `hopcount_limit` `Received:`
//! headers or more is refused (554 5.4.6, mail forwarding loop): the relay
//! that sent it returns it to its sender, and drops it if that sender is
//! `<>`.

use std::cell::Cell;
use std::io;
use std::net::IpAddr;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coro::clock::Instant;

mod auth;

use crate::auth::sasl::Mechanism;
use crate::auth::User;
use crate::body::{Body, MAX_TEXT_LINE};
use crate::config::Config;
use crate::dsn::{Dsn, RcptDsn};
use crate::protocol::{self, Command, MailParams, Reply};
use crate::server::Relay;
use crate::spool::{Envelope, Message};
use crate::time::Utc;
use crate::wire::{timed, Line, Wire};

/// RFC 5321 §4.5.3.1.4: a command line, CRLF included.
const MAX_COMMAND_LINE: usize = 512;

/// Where a session is, as the server's stop logic sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a command with no transaction open: can be ended at
    /// once at stop.
    Idle,
    /// Inside a transaction (or answering): gets until the deadline.
    Busy,
}

/// The listener a session came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The MTA listener (`listen`): mail from other servers, and relaying
    /// for `mynetworks`.
    Mta,
    /// Submission with STARTTLS (`[submission] listen`, port 587's
    /// service): TLS and AUTH before mail, whatever `mynetworks` says.
    Submission,
    /// Submission with implicit TLS (`[submission] listen_tls`, port
    /// 465's service, RFC 8314).
    SubmissionTls,
}

impl Port {
    /// Whether this is a submission port (AUTH before mail).
    pub fn is_submission(self) -> bool {
        self != Port::Mta
    }
}

/// A transaction: MAIL seen, collecting recipients.
struct Txn {
    /// When MAIL was accepted (the start of `delays=`'s a).
    started: Instant,
    from: String,
    params: MailParams,
    rcpts: Vec<String>,
    /// RET, ENVID and each recipient's NOTIFY and ORCPT (RFC 3461).
    dsn: Dsn,
}

/// How a session ended, for the log.
enum End {
    Quit,
    Closed(&'static str),
}

/// One session's state.
pub struct Session {
    relay: Rc<Relay>,
    wire: Wire,
    client: IpAddr,
    /// The name from EHLO/HELO, once given.
    helo: Option<String>,
    /// EHLO (not HELO) was used.
    esmtp: bool,
    txn: Option<Txn>,
    /// Rejected commands so far.
    errors: u32,
    /// Junk commands ([`protocol::Spec::junk`]) since the last accepted
    /// message.
    junk: u32,
    /// Commands seen, for the disconnect line.
    commands: u32,
    /// The last command's verb, for "timeout after RCPT".
    last: &'static str,
    phase: Rc<Cell<Phase>>,
    /// The listener it came through.
    port: Port,
    /// The user it logged in as (submission ports), and how.
    login: Option<(User, Mechanism)>,
}

impl Session {
    /// A session for a connection accepted on `port`.
    pub fn new(relay: Rc<Relay>, wire: Wire, phase: Rc<Cell<Phase>>, port: Port) -> Session {
        let client = wire.peer().ip();
        Session {
            relay,
            wire,
            client,
            helo: None,
            esmtp: false,
            txn: None,
            errors: 0,
            junk: 0,
            commands: 0,
            last: "CONNECT",
            phase,
            port,
            login: None,
        }
    }

    /// Runs the session to its end.
    pub fn run(mut self) {
        let peer = self.wire.peer();
        log::info!("connect from [{}]:{}", peer.ip(), peer.port());
        let end = self.serve();
        let how = match end {
            End::Quit => "quit".to_owned(),
            End::Closed(why) => why.to_owned(),
        };
        log::info!(
            "disconnect from [{}]:{} commands={} errors={} tls={} ({how})",
            peer.ip(),
            peer.port(),
            self.commands,
            self.errors,
            if self.wire.is_tls() { "yes" } else { "no" }
        );
        self.wire.close();
    }

    /// Our host name (as configured now).
    fn host(&self) -> String {
        self.relay.config().hostname.clone()
    }

    fn serve(&mut self) -> End {
        if self.port.is_submission() {
            if let ControlFlow::Break(end) = self.submission_start() {
                return end;
            }
        }
        let greeting = format!("{} ESMTP mail-relay", self.host());
        self.wire.reply(220, &[&greeting]);
        loop {
            let t = self.relay.config().timeouts.clone();
            let timeout = match (&self.helo, &self.txn) {
                (None, _) => t.greeting,
                (Some(_), None) => t.mail,
                (Some(_), Some(_)) => t.rcpt,
            };
            if self.txn.is_none() {
                if self.relay.stopping.get() && !self.wire.has_buffered_input() {
                    return self.shutting_down();
                }
                self.phase.set(Phase::Idle);
            }
            // One deadline for the whole line, however it trickles in.
            // It starts when the wait does (our replies sent).
            let (start, relay) = (Cell::new(None), self.relay.clone());
            let deadline = move |_: u64, _: Instant| {
                let t0 = *start.get().get_or_insert_with(coro::clock::now);
                start.set(Some(t0));
                t0 + relay.timeout(timeout)
            };
            // Under TLS on a submission port, AUTH's initial response may
            // make a longer line (RFC 4954 §4); other commands may not.
            let max = if self.port.is_submission() && self.wire.is_tls() {
                auth::MAX_AUTH_LINE
            } else {
                MAX_COMMAND_LINE
            };
            let line = self.wire.read_line(max, &deadline);
            self.phase.set(Phase::Busy);
            let line = match line {
                Ok(l) => l,
                Err(e) => return self.wait_failed(e),
            };
            let long = self.wire.line().len() + 2 > MAX_COMMAND_LINE
                && protocol::verb_of(self.wire.line()) != "AUTH";
            match line {
                Line::Text if !long => {}
                Line::Eof => return self.lost(),
                Line::Text | Line::TooLong => {
                    if let ControlFlow::Break(end) =
                        self.reject(Reply::new(500, "5.5.2", "Error: line too long"))
                    {
                        return end;
                    }
                    continue;
                }
                Line::BareLf | Line::BareCr => return self.bare(line),
            }
            self.commands += 1;
            let cmd = match protocol::parse(self.wire.line(), self.esmtp) {
                Ok(c) => c,
                Err(reply) => {
                    self.last = protocol::verb_of(self.wire.line());
                    if let ControlFlow::Break(end) = self.reject(reply) {
                        return end;
                    }
                    continue;
                }
            };
            self.last = cmd.verb();
            if let ControlFlow::Break(end) = self.command(cmd) {
                return end;
            }
        }
    }

    /// Answers one command, then counts it if its entry in the command
    /// table says it is junk; `Break` ends the session.
    fn command(&mut self, cmd: Command) -> ControlFlow<End> {
        let junk = cmd.spec().junk;
        match cmd {
            Command::Ehlo(name) => {
                self.helo = Some(name);
                self.esmtp = true;
                self.txn = None;
                let c = self.relay.config();
                let size = format!("SIZE {}", c.max_message_size);
                let mut lines = vec![self.host().to_owned(), "PIPELINING".into(), size];
                if self.relay.tls.is_some() && !self.wire.is_tls() {
                    lines.push("STARTTLS".into());
                }
                if self.port.is_submission() && self.wire.is_tls() {
                    lines.push(format!("AUTH {}", crate::auth::sasl::OFFERED));
                }
                lines.extend(
                    ["ENHANCEDSTATUSCODES", "8BITMIME", "DSN", "SMTPUTF8"].map(String::from),
                );
                let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
                self.wire.reply(250, &lines);
            }
            Command::Helo(name) => {
                self.helo = Some(name);
                self.esmtp = false;
                self.txn = None;
                let host = self.host().to_owned();
                self.wire.reply(250, &[&host]);
            }
            Command::Mail(from, params) => self.mail(from, params)?,
            Command::Rcpt(to, dsn) => self.rcpt(to, dsn)?,
            Command::Data => self.data()?,
            Command::Rset => {
                self.txn = None;
                self.reply(250, "2.0.0", "Ok");
            }
            Command::Noop => {
                self.reply(250, "2.0.0", "Ok");
            }
            Command::Vrfy => {
                self.reply(
                    252,
                    "2.0.0",
                    "Cannot VRFY user, but will accept message and attempt delivery",
                );
            }
            Command::Help => {
                self.reply(
                    214,
                    "2.0.0",
                    "Commands: EHLO HELO MAIL RCPT DATA RSET NOOP QUIT VRFY HELP STARTTLS",
                );
            }
            Command::Quit => {
                self.reply(221, "2.0.0", "Bye");
                return ControlFlow::Break(End::Quit);
            }
            Command::StartTls => self.starttls()?,
            Command::Auth(mech, initial) => self.auth(mech, initial)?,
        }
        if junk {
            self.junk()
        } else {
            ControlFlow::Continue(())
        }
    }

    fn mail(&mut self, from: String, params: MailParams) -> ControlFlow<End> {
        if self.helo.is_none() {
            return self.reject(Reply::new(503, "5.5.1", "Error: send HELO/EHLO first"));
        }
        if self.txn.is_some() {
            return self.reject(Reply::new(503, "5.5.1", "Error: nested MAIL command"));
        }
        if self.relay.stopping.get() {
            return ControlFlow::Break(self.shutting_down());
        }
        if let Err(reply) = self.submission_mail(&from) {
            return self.reject_with(reply, &format!(" from=<{}>", crate::escape::escape(&from)));
        }
        let max = self.relay.config().max_message_size;
        if params.size.is_some_and(|s| s > max) {
            return self.reject(Reply::new(
                552,
                "5.3.4",
                format!("Message size exceeds fixed limit of {max} octets"),
            ));
        }
        let dsn = Dsn {
            ret: params.ret,
            envid: params.envid.clone(),
            rcpts: Vec::new(),
        };
        self.txn = Some(Txn {
            started: coro::clock::now(),
            from,
            params,
            rcpts: Vec::new(),
            dsn,
        });
        self.reply(250, "2.1.0", "Ok");
        ControlFlow::Continue(())
    }

    fn rcpt(&mut self, to: String, dsn: RcptDsn) -> ControlFlow<End> {
        let Some(txn) = &self.txn else {
            return self.reject(Reply::new(503, "5.5.1", "Error: need MAIL command"));
        };
        if !to.is_ascii() && !txn.params.smtputf8 {
            return self.reject(protocol::needs_utf8());
        }
        if txn.rcpts.iter().any(|r| r.eq_ignore_ascii_case(&to)) {
            // RFC 5321 §3.3 lets a server drop a duplicate; one copy goes.
            log::debug!(
                "duplicate recipient <{to}> from [{}] collapsed",
                self.client
            );
            self.reply(250, "2.1.5", "Ok");
            return ControlFlow::Continue(());
        }
        if txn.rcpts.len() >= self.relay.config().max_recipients {
            // The client sends the rest in another transaction; still, a
            // client that keeps trying counts toward the error limit (as in
            // Postfix), so that it cannot loop on 452 for ever.
            self.reply(452, "4.5.3", "Error: too many recipients");
            return self.count_error();
        }
        let allowed = self.may_relay();
        let routed = !allowed && sender_routed(&to);
        if routed || !(allowed || self.relay.may_receive(self.client, &to)) {
            // Sender-specified routing (`a%b@relay`, `b!a@relay`,
            // `"a@b"@relay`) from outside mynetworks would let anyone use
            // a relay domain's next hop as an open relay (Postfix's
            // `allow_untrusted_routing = no`).
            let reply = Reply::new(554, "5.7.1", format!("<{to}>: Relay access denied"));
            let from = txn.from.clone();
            return self.reject_with(reply, &format!(" from=<{from}> to=<{to}>"));
        }
        let txn = self.txn.as_mut().expect("checked");
        txn.dsn.set_rcpt(txn.rcpts.len(), dsn);
        txn.rcpts.push(to);
        self.reply(250, "2.1.5", "Ok");
        ControlFlow::Continue(())
    }

    /// DATA: the message up to the final dot, the checks of its content,
    /// and its commit into the spool.
    fn data(&mut self) -> ControlFlow<End> {
        let Some(txn) = &self.txn else {
            return self.reject(Reply::new(503, "5.5.1", "Error: need MAIL command"));
        };
        if txn.rcpts.is_empty() {
            return self.reject(Reply::new(554, "5.5.1", "Error: no valid recipients"));
        }
        let started = txn.started;
        let mut env = self.envelope(txn);
        self.wire.reply(354, &["End data with <CR><LF>.<CR><LF>"]);
        let c = self.relay.config();
        let body = self.receive(&env, &c)?;
        self.txn = None;
        if let Some((reply, extra)) = refusal(&body, &env, &c) {
            return self.reject_with(reply, &extra);
        }
        env.arrival = SystemTime::now();
        env.has_8bit = body.has_8bit;
        self.commit(body, env, started, c.timeouts.final_dot)
    }

    /// The envelope of `txn`'s message, under a new queue id.
    fn envelope(&self, txn: &Txn) -> Envelope {
        Envelope {
            id: crate::id::next(),
            arrival: SystemTime::now(),
            client: self.wire.peer(),
            helo: self.helo.clone().unwrap_or_default(),
            from: txn.from.clone(),
            rcpts: txn.rcpts.clone(),
            eight_bit: txn.params.eight_bit,
            smtputf8: txn.params.smtputf8,
            has_8bit: false,
            trusted: self.trusted_source(),
            dsn: txn.dsn.clone(),
        }
    }

    /// Reads the message after the 354 up to the final dot into a
    /// [`Body`], under the DATA block's deadline. `Break` ends the session
    /// (a timeout, a bare CR or LF, the connection lost).
    fn receive(&mut self, env: &Envelope, c: &Config) -> ControlFlow<End, Body> {
        let t = &c.timeouts;
        let rate = c.min_data_rate.max(1);
        let trusted = c.add_missing_headers && self.trusted_source();
        let mut body = Body::new(
            self.received_header(&env.id),
            c.max_message_size,
            trusted.then(|| self.host().to_owned()),
        );
        // One deadline for the whole DATA block: the first data within
        // data_init, then data_block from the first data plus 1/min_data_rate s
        // per octet received, and never more than data_block of silence.
        // A client that drips its message gets no more time than it earns.
        let (base, relay) = (self.wire.received(), self.relay.clone());
        let t0: Cell<Option<Instant>> = Cell::new(None);
        let (data_init, data_block) = (t.data_init, t.data_block);
        let first: Cell<Option<Instant>> = Cell::new(None);
        let deadline = move |received: u64, last: Instant| {
            let got = received - base;
            if got == 0 {
                // From when the 354 is out.
                let sent = *t0.get().get_or_insert_with(coro::clock::now);
                t0.set(Some(sent));
                return sent + relay.timeout(data_init);
            }
            // `last` is the first data's arrival the first time through.
            let start = *first.get().get_or_insert(last);
            first.set(Some(start));
            let block = relay.timeout(data_block);
            let earned = Duration::from_secs_f64(got as f64 / rate as f64);
            (start + block + earned).min(last + block)
        };
        let spool = self.relay.spool.clone();
        loop {
            // One more octet than a text line may have: a stuffed dot
            // does not count (RFC 5321 §4.5.3.1.6); Body checks the rest.
            let line = match self.wire.read_line(MAX_TEXT_LINE + 1, &deadline) {
                Ok(l) => l,
                Err(e) => return ControlFlow::Break(self.wait_failed(e)),
            };
            match line {
                Line::Text => {
                    let text = self.wire.line();
                    if text == b"." {
                        return ControlFlow::Continue(body);
                    }
                    let text = text.strip_prefix(b".").unwrap_or(text);
                    if let Err(e) = body.line(text, &spool, env) {
                        return ControlFlow::Break(self.wait_failed(e));
                    }
                }
                Line::TooLong => body.too_long = true,
                Line::BareLf | Line::BareCr => return ControlFlow::Break(self.bare(line)),
                Line::Eof => return ControlFlow::Break(self.lost()),
            }
        }
    }

    /// Makes the received message durable in the spool, waiting at most
    /// `final_dot`, and answers: 250 with its queue id, or 451 when the
    /// spool failed or took too long.
    fn commit(
        &mut self,
        body: Body,
        env: Envelope,
        started: Instant,
        final_dot: Duration,
    ) -> ControlFlow<End> {
        let (size, message_id) = (body.size, body.message_id.clone());
        let (id, from, nrcpt) = (env.id.clone(), env.from.clone(), env.rcpts.len());
        let content = match body.finish(&env) {
            Ok(c) => c,
            Err(e) if is_interrupt(&e) => return ControlFlow::Break(self.wait_failed(e)),
            Err(e) => {
                log::warn!("{id}: writing the message into the spool failed: {e}");
                return self.reject(Reply::new(451, "4.3.0", "Error: queue file write error"));
            }
        };
        let spool = &self.relay.spool;
        let r = match content {
            Ok(spilled) => {
                let msg = Arc::new(Message {
                    env,
                    data: Vec::new(),
                });
                timed(final_dot, || {
                    spool.commit_received(msg, Some(spilled), Some(started))
                })
            }
            Err(data) => {
                let msg = Arc::new(Message { env, data });
                timed(final_dot, || {
                    spool.commit_received(msg, None, Some(started))
                })
            }
        };
        match r {
            Ok(()) => {
                self.queued(&id, &from, size, nrcpt, message_id);
                ControlFlow::Continue(())
            }
            Err(e) if is_interrupt(&e) => ControlFlow::Break(self.wait_failed(e)),
            Err(e) => {
                log::warn!("{id}: commit to the spool failed or took too long: {e}");
                self.reject(Reply::new(451, "4.3.0", "Error: queue file write error"))
            }
        }
    }

    /// A message is in the spool: logged, counted, answered 250.
    fn queued(
        &mut self,
        id: &str,
        from: &str,
        size: u64,
        nrcpt: usize,
        message_id: Option<String>,
    ) {
        let sasl = match &self.login {
            Some((user, m)) => format!(
                ", sasl_method={}, sasl_username={}",
                m.name(),
                crate::escape::escape(&user.name)
            ),
            None => String::new(),
        };
        log::info!(
            "{id}: client=[{}]:{}{sasl}, from=<{}>, size={size}, nrcpt={} (queue active)",
            self.client,
            self.wire.peer().port(),
            from,
            nrcpt
        );
        // (Empty when the header's value is folded onto its next
        // line, which the scan does not follow.)
        if let Some(mid) = message_id.filter(|m| !m.is_empty()) {
            log::info!("{id}: message-id=<{mid}>");
        }
        self.reply(250, "2.0.0", &format!("Ok: queued as {id}"));
        crate::metrics::get().accepted.inc();
        self.junk = 0;
    }

    fn starttls(&mut self) -> ControlFlow<End> {
        let Some(tls) = self.relay.tls.clone() else {
            return self.reject(Reply::new(454, "4.7.0", "TLS not available"));
        };
        if self.wire.is_tls() {
            return self.reject(Reply::new(503, "5.5.1", "Error: TLS already active"));
        }
        self.reply(220, "2.0.0", "Ready to start TLS");
        if let Err(e) = self.wire.flush() {
            return ControlFlow::Break(self.wait_failed(e));
        }
        let injected = self.wire.discard_buffered();
        if injected > 0 {
            log::warn!(
                "discarding {injected} octets of plaintext pipelined after STARTTLS from [{}]",
                self.client
            );
        }
        self.tls_handshake(tls)?;
        // RFC 3207 §4.2: forget everything said before TLS.
        self.helo = None;
        self.esmtp = false;
        self.txn = None;
        self.login = None;
        ControlFlow::Continue(())
    }

    /// Runs the server side of the TLS handshake (after STARTTLS, or at
    /// once on the implicit-TLS port) and logs how it went; `Break` when
    /// it failed, which ends the session.
    fn tls_handshake(&mut self, tls: Arc<rustls::ServerConfig>) -> ControlFlow<End> {
        if let Err(e) = self.wire.start_tls(tls) {
            log::info!("TLS handshake with [{}] failed: {e}", self.client);
            return ControlFlow::Break(End::Closed("TLS handshake failed"));
        }
        log::info!(
            "TLS connection established from [{}]:{}: {}",
            self.client,
            self.wire.peer().port(),
            self.wire.tls_info().unwrap_or_default()
        );
        ControlFlow::Continue(())
    }

    /// Whether this session's mail comes from a trusted source, which the
    /// relay vouches for (DKIM signs it, as OpenDKIM's `InternalHosts`):
    /// on the MTA port a client in `mynetworks`, on a submission port a
    /// logged-in user (and no one else, whatever its address). This is
    /// the one place that decides it.
    fn trusted_source(&self) -> bool {
        match self.port {
            Port::Mta => self.relay.trusted(self.client),
            Port::Submission | Port::SubmissionTls => self.login.is_some(),
        }
    }

    /// Whether this session may send to any domain: the same as
    /// [`trusted_source`](Session::trusted_source). The submission ports
    /// never relay without a login, whatever `mynetworks` says.
    fn may_relay(&self) -> bool {
        self.trusted_source()
    }

    /// `Received:` (RFC 5321 §4.4), CRLF-terminated.
    fn received_header(&self, id: &str) -> Vec<u8> {
        let txn = self.txn.as_ref().expect("a transaction");
        let mut proto = String::new();
        if txn.params.smtputf8 {
            proto.push_str("UTF8SMTP");
        } else if self.esmtp {
            proto.push_str("ESMTP");
        } else {
            proto.push_str("SMTP");
        }
        if self.wire.is_tls() {
            proto.push('S');
        }
        // RFC 3848: ESMTPA, ESMTPSA for an authenticated submission.
        if self.login.is_some() {
            proto.push('A');
        }
        let for_ = match txn.rcpts.as_slice() {
            [one] => format!("\r\n\tfor <{one}>"),
            _ => String::new(),
        };
        // A submission's client (its address, its EHLO name) is its user's
        // whereabouts: left out unless the operator asks for it.
        let from =
            if self.login.is_some() && !self.relay.config().submission.received_client_address {
                String::new()
            } else {
                format!(
                    "from {} ([{}])\r\n\t",
                    self.helo.as_deref().unwrap_or("unknown"),
                    self.client
                )
            };
        format!(
            "Received: {from}by {} (mail-relay) with {proto} id {id}{for_};\r\n\t{}\r\n",
            self.host(),
            Utc::now().rfc5322()
        )
        .into_bytes()
    }

    /// Queues a one-line reply of any class with its enhanced status code
    /// (RFC 2034): `250 2.0.0 Ok`, and as well the 421 and 521 that end a
    /// session.
    fn reply(&mut self, code: u16, status: &str, text: &str) {
        self.wire.reply(code, &[&format!("{status} {text}")]);
    }

    /// Queues a rejection, logs it, counts it; `Break` if that was one
    /// error too many.
    fn reject(&mut self, reply: Reply) -> ControlFlow<End> {
        self.reject_with(reply, "")
    }

    fn reject_with(&mut self, reply: Reply, extra: &str) -> ControlFlow<End> {
        log::info!(
            "NOQUEUE: reject: {} from [{}]: {reply};{extra} helo=<{}>",
            self.last,
            self.client,
            self.helo.as_deref().unwrap_or("")
        );
        self.reply(reply.code, reply.status, &reply.text);
        self.count_error()
    }

    /// Counts a junk command ([`protocol::Spec::junk`]): past
    /// `junk_command_limit` of them, each counts as an error too.
    fn junk(&mut self) -> ControlFlow<End> {
        self.junk += 1;
        if self.junk > self.relay.config().junk_command_limit {
            log::info!(
                "too many junk commands ({}) after {} from [{}]",
                self.junk,
                self.last,
                self.client
            );
            return self.count_error();
        }
        ControlFlow::Continue(())
    }

    /// Counts an error; ends the session with 421 at `error_limit`.
    fn count_error(&mut self) -> ControlFlow<End> {
        self.errors += 1;
        if self.errors >= self.relay.config().error_limit {
            log::info!("too many errors after {} from [{}]", self.last, self.client);
            self.reply(
                421,
                "4.7.0",
                &format!("{} Error: too many errors", self.host()),
            );
            return ControlFlow::Break(End::Closed("too many errors"));
        }
        ControlFlow::Continue(())
    }

    /// A bare LF or CR: the session ends (Postfix's `smtpd_forbid_bare_newline`).
    fn bare(&mut self, line: Line) -> End {
        let what = if line == Line::BareLf { "<LF>" } else { "<CR>" };
        log::info!(
            "NOQUEUE: reject: {} from [{}]: bare {what} received",
            self.last,
            self.client
        );
        self.reply(
            521,
            "5.5.2",
            &format!("{} Error: bare {what} received", self.host()),
        );
        End::Closed("bare newline")
    }

    fn lost(&mut self) -> End {
        log::info!("lost connection after {} from [{}]", self.last, self.client);
        End::Closed("lost connection")
    }

    fn shutting_down(&mut self) -> End {
        let text = format!(
            "{} Service shutting down, closing transmission channel",
            self.host()
        );
        self.reply(421, "4.3.2", &text);
        End::Closed("shutdown")
    }

    /// A wait for the client failed: a timeout (421), an interruption
    /// (shutdown: 421), or the connection broke.
    fn wait_failed(&mut self, e: io::Error) -> End {
        if e.kind() == io::ErrorKind::TimedOut {
            log::info!("timeout after {} from [{}]", self.last, self.client);
            let text = format!("{} Error: timeout exceeded", self.host());
            self.reply(421, "4.4.2", &text);
            End::Closed("timeout")
        } else if is_interrupt(&e) && !self.relay.stopping.get() {
            // Not the stop: someone ended this session by hand (the back
            // door's `interrupt`, which logs who).
            log::info!(
                "session #{} with [{}] interrupted after {} (not a stop; the back door logs by whom)",
                coro::current_id().unwrap_or(0),
                self.client,
                self.last
            );
            let text = format!("{} Error: session ended by the administrator", self.host());
            self.reply(421, "4.3.0", &text);
            End::Closed("interrupted by the administrator")
        } else if is_interrupt(&e) {
            self.shutting_down()
        } else {
            log::info!(
                "lost connection after {} from [{}]: {e}",
                self.last,
                self.client
            );
            End::Closed("lost connection")
        }
    }
}

/// Whether a recipient routes by its local part: `%` or `!` in it, or an
/// `@` inside it (`a@b@c`, `"a@b"@c`).
fn sender_routed(rcpt: &str) -> bool {
    match rcpt.rfind('@') {
        Some(at) => rcpt[..at].contains(['%', '!', '@']),
        None => false,
    }
}

/// Why a received message is refused, if it is: too big, a line too
/// long, or too many hops; with what the log's line adds.
fn refusal(body: &Body, env: &Envelope, c: &Config) -> Option<(Reply, String)> {
    let max = c.max_message_size;
    if body.too_big {
        return Some((
            Reply::new(
                552,
                "5.3.4",
                format!("Error: message exceeds fixed limit of {max} octets"),
            ),
            String::new(),
        ));
    }
    if body.too_long {
        return Some((
            Reply::new(
                554,
                "5.6.0",
                "Error: message has a line longer than 1000 octets",
            ),
            String::new(),
        ));
    }
    let hops = body.hops;
    if hops >= c.hopcount_limit {
        // RFC 5321 §6.3: a message that has passed this many relays is
        // looping. Refused here, it goes back to its sender from the
        // relay that sent it; a looping bounce (from <>) is dropped
        // there, never bounced again.
        return Some((
            Reply::new(
                554,
                "5.4.6",
                format!("Error: too many hops ({hops} Received: headers): mail forwarding loop"),
            ),
            format!(" from=<{}>", env.from),
        ));
    }
    None
}

/// Whether `e` is an interruption (the server stopping this session).
fn is_interrupt(e: &io::Error) -> bool {
    coro::WaitError::from_io(e) == Some(coro::WaitError::Interrupted)
}
