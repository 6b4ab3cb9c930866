//! A session of the submission service (RFC 6409): TLS first (implicit on
//! the TLS port, RFC 8314; STARTTLS on the other), then AUTH (RFC 4954),
//! then mail from the user's own addresses only.
//!
//! ```text
//! S: 220 ...                     (on the TLS port, after the handshake)
//! C: EHLO client                 S: 250-... STARTTLS (no AUTH before TLS)
//! C: STARTTLS, EHLO client       S: 250-... AUTH PLAIN LOGIN
//! C: MAIL FROM:<a@b>             S: 530 5.7.0 Authentication required
//! C: AUTH PLAIN <base64>         S: 235 2.7.0 | 535 5.7.8 (after a delay)
//! C: MAIL FROM:<a@b>             S: 250 | 553 5.7.1 (not the user's address)
//! ```
//!
//! A failed login waits `auth_failure_delay` before its 535; the one that
//! reaches `auth_failure_limit` failures in a row from the address (over
//! all its sessions) gets 421 and ends the session, and the address is
//! refused at its next connections, and at its next AUTH on sessions
//! already open, until `auth_lockout` has passed
//! ([`crate::auth::anvil`]). The password is never logged; a failure
//! names its user only when the user exists.

use std::cell::Cell;
use std::ops::ControlFlow;
use std::rc::Rc;

use coro::clock::Instant;

use super::{End, Port, Session};
use crate::auth::sasl::{self, Credentials, Mechanism};
use crate::auth::{Auth, Login, Verdict};
use crate::escape::escape;
use crate::protocol::Reply;
use crate::wire::Line;

/// RFC 4954 §4: an AUTH command line or response, CRLF included, may be
/// this long (a long password's base64 in an initial response).
pub(super) const MAX_AUTH_LINE: usize = 12_288;

/// Why an AUTH exchange stopped before a login was checked.
enum Stop {
    /// The session ends.
    End(End),
    /// The command is refused with this reply.
    Refuse(Reply),
}

impl Session {
    /// Before the greeting on a submission port: the TLS handshake on the
    /// TLS port, then the lockout check. `Break` ends the session.
    pub(super) fn submission_start(&mut self) -> ControlFlow<End> {
        if self.port == Port::SubmissionTls {
            let Some(tls) = self.relay.tls.clone() else {
                return ControlFlow::Break(End::Closed("no TLS configured"));
            };
            self.tls_handshake(tls)?;
        }
        let Some(auth) = self.relay.auth.clone() else {
            return ControlFlow::Continue(());
        };
        self.locked_out(&auth)
    }

    /// If the client's address is locked out now: 421, and the session
    /// ends (`Break`).
    fn locked_out(&mut self, auth: &Auth) -> ControlFlow<End> {
        let Some(left) = auth.locked(self.client) else {
            return ControlFlow::Continue(());
        };
        log::info!(
            "refusing [{}]:{}: locked out after too many failed logins, for another {}s",
            self.client,
            self.wire.peer().port(),
            left.as_secs() + 1
        );
        let text = format!(
            "{} Error: too many failed logins from your address; try again later",
            self.host()
        );
        self.reply(421, "4.7.0", &text);
        ControlFlow::Break(End::Closed("locked out"))
    }

    /// Whether MAIL may start a transaction here: on the submission ports
    /// only under TLS, logged in, from one of the user's addresses.
    pub(super) fn submission_mail(&mut self, from: &str) -> Result<(), Reply> {
        if !self.port.is_submission() {
            return Ok(());
        }
        if !self.wire.is_tls() {
            return Err(Reply::new(
                530,
                "5.7.0",
                "Must issue a STARTTLS command first",
            ));
        }
        let Some((user, _)) = &self.login else {
            return Err(Reply::new(530, "5.7.0", "Authentication required"));
        };
        if !user.owns(from) {
            return Err(Reply::new(
                553,
                "5.7.1",
                format!(
                    "<{}>: Sender address rejected: not owned by user {}",
                    escape(from),
                    escape(&user.name)
                ),
            ));
        }
        Ok(())
    }

    /// AUTH: the exchange, the check of the password, the verdict.
    pub(super) fn auth(&mut self, mech: String, initial: Option<String>) -> ControlFlow<End> {
        let Some(auth) = self
            .relay
            .auth
            .clone()
            .filter(|_| self.port.is_submission())
        else {
            return self.reject(Reply::new(
                503,
                "5.5.1",
                "Error: authentication not enabled",
            ));
        };
        let refusal = if !self.esmtp {
            Some(Reply::new(503, "5.5.1", "Error: send EHLO first"))
        } else if !self.wire.is_tls() {
            Some(Reply::new(
                538,
                "5.7.11",
                "Encryption required for requested authentication mechanism",
            ))
        } else if self.login.is_some() {
            Some(Reply::new(503, "5.5.1", "Error: already authenticated"))
        } else if self.txn.is_some() {
            Some(Reply::new(
                503,
                "5.5.1",
                "Error: MAIL transaction in progress",
            ))
        } else {
            None
        };
        if let Some(r) = refusal {
            return self.reject(r);
        }
        // Sessions opened before the lockout guess no further: the limit
        // holds over all of an address's sessions, not per session.
        self.locked_out(&auth)?;
        let Some(m) = Mechanism::parse(&mech) else {
            return self.reject(Reply::new(504, "5.5.4", "Unrecognized authentication type"));
        };
        let creds = match self.exchange(m, initial) {
            Ok(c) => c,
            Err(Stop::End(end)) => return ControlFlow::Break(end),
            Err(Stop::Refuse(r)) => return self.reject(r),
        };
        let name = creds.user.clone();
        let login = match auth.verify(&creds.user, creds.password) {
            Ok(l) => l,
            Err(w) => return ControlFlow::Break(self.wait_failed(w.into())),
        };
        match login {
            Login::Ok(user) => {
                auth.anvil().success(self.client);
                log::info!(
                    "[{}]:{}: login: sasl_method={}, sasl_username={}",
                    self.client,
                    self.wire.peer().port(),
                    m.name(),
                    escape(&user.name)
                );
                self.login = Some((user, m));
                self.reply(235, "2.7.0", "Authentication successful");
                ControlFlow::Continue(())
            }
            Login::Failed { known } => self.login_failed(&auth, m, &name, known),
        }
    }

    /// A failed login: counted for the address, logged, answered 535
    /// after the delay, or 421 and the end at the limit.
    fn login_failed(
        &mut self,
        auth: &Rc<Auth>,
        m: Mechanism,
        name: &str,
        known: bool,
    ) -> ControlFlow<End> {
        let c = self.relay.config();
        let s = &c.submission;
        let verdict = auth
            .anvil()
            .failure(self.client, s.auth_failure_limit, s.auth_lockout);
        let who = if known {
            format!("sasl_username={}", escape(name))
        } else {
            "an unknown user".to_owned()
        };
        // Slow the next guess, on this green thread only.
        if let Err(w) = coro::sleep(s.auth_failure_delay) {
            return ControlFlow::Break(self.wait_failed(w.into()));
        }
        match verdict {
            Verdict::Again { failures } => {
                log::info!(
                    "[{}]:{}: login failed: sasl_method={}, {who} ({failures} in a row; {} lock the address out)",
                    self.client,
                    self.wire.peer().port(),
                    m.name(),
                    s.auth_failure_limit
                );
                self.reject(Reply::new(535, "5.7.8", "Error: authentication failed"))
            }
            Verdict::LockedOut { failures } => {
                log::warn!(
                    "[{}]:{}: login failed: sasl_method={}, {who}: {failures} failures in a row; \
                     disconnected, and the address is refused for {}s",
                    self.client,
                    self.wire.peer().port(),
                    m.name(),
                    s.auth_lockout.as_secs()
                );
                let text = format!(
                    "{} Error: too many failed logins; try again later",
                    self.host()
                );
                self.reply(421, "4.7.0", &text);
                ControlFlow::Break(End::Closed("too many failed logins"))
            }
        }
    }

    /// The SASL exchange of `m`: the initial response or 334 challenges,
    /// decoded into a user name and password.
    fn exchange(&mut self, m: Mechanism, initial: Option<String>) -> Result<Credentials, Stop> {
        let bad = |why: &str| Stop::Refuse(Reply::new(501, "5.5.2", format!("Error: {why}")));
        match m {
            Mechanism::Plain => {
                let raw = match initial {
                    Some(i) => sasl::decode(i.as_bytes()).map_err(bad)?,
                    None => self.response("")?,
                };
                sasl::plain(&raw).map_err(bad)
            }
            Mechanism::Login => {
                let user = match initial {
                    Some(i) => sasl::decode(i.as_bytes()).map_err(bad)?,
                    None => self.response(&sasl::encode("Username:"))?,
                };
                let user = sasl::name(&user).map_err(bad)?;
                let password = self.response(&sasl::encode("Password:"))?;
                Ok(Credentials { user, password })
            }
        }
    }

    /// Sends the challenge `334 text` and reads the client's response,
    /// decoded; `*` cancels (RFC 4954 §4).
    fn response(&mut self, challenge: &str) -> Result<Vec<u8>, Stop> {
        self.wire.reply(334, &[challenge]);
        let timeout = self.relay.config().timeouts.mail;
        let (start, relay) = (Cell::new(None), self.relay.clone());
        let deadline = move |_: u64, _: Instant| {
            let t0 = *start.get().get_or_insert_with(coro::clock::now);
            start.set(Some(t0));
            t0 + relay.timeout(timeout)
        };
        let line = match self.wire.read_line(MAX_AUTH_LINE, &deadline) {
            Ok(l) => l,
            Err(e) => return Err(Stop::End(self.wait_failed(e))),
        };
        match line {
            Line::Text => {}
            Line::Eof => return Err(Stop::End(self.lost())),
            Line::TooLong => {
                return Err(Stop::Refuse(Reply::new(
                    500,
                    "5.5.6",
                    "Error: authentication exchange line is too long",
                )))
            }
            Line::BareLf | Line::BareCr => return Err(Stop::End(self.bare(line))),
        }
        if self.wire.line() == b"*" {
            return Err(Stop::Refuse(Reply::new(
                501,
                "5.0.0",
                "Authentication cancelled",
            )));
        }
        sasl::decode(self.wire.line())
            .map_err(|why| Stop::Refuse(Reply::new(501, "5.5.2", format!("Error: {why}"))))
    }
}
