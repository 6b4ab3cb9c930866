//! Why a conversation with an upstream failed, in Postfix's words
//! ("conversation with X timed out while sending RCPT TO", "host X said:
//! 450 ... (in reply to DATA command)"), and the deferral that follows.

use std::fmt;
use std::io;

use super::reply::Reply;
use crate::delivery::Detail;

/// Where in the conversation something happened (Postfix's wording).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for the 220.
    Greeting,
    /// EHLO.
    Ehlo,
    /// HELO.
    Helo,
    /// STARTTLS and the handshake.
    StartTls,
    /// RSET before a message on a reused connection.
    Rset,
    /// MAIL FROM.
    Mail,
    /// RCPT TO.
    Rcpt,
    /// DATA.
    Data,
    /// The content.
    Body,
    /// The final dot's reply.
    Dot,
}

impl Stage {
    /// "while ..." in a message.
    pub fn doing(self) -> &'static str {
        match self {
            Stage::Greeting => "receiving the initial server greeting",
            Stage::Ehlo => "performing the EHLO handshake",
            Stage::Helo => "performing the HELO handshake",
            Stage::StartTls => "performing the STARTTLS handshake",
            Stage::Rset => "sending RSET",
            Stage::Mail => "sending MAIL FROM",
            Stage::Rcpt => "sending RCPT TO",
            Stage::Data => "sending DATA command",
            Stage::Body => "sending message body",
            Stage::Dot => "sending end of data -- message may be sent more than once",
        }
    }

    /// "(in reply to ... command)".
    pub fn command(self) -> &'static str {
        match self {
            Stage::Greeting => "initial greeting",
            Stage::Ehlo => "EHLO",
            Stage::Helo => "HELO",
            Stage::StartTls => "STARTTLS",
            Stage::Rset => "RSET",
            Stage::Mail => "MAIL FROM",
            Stage::Rcpt => "RCPT TO",
            Stage::Data | Stage::Body => "DATA",
            Stage::Dot => "end of DATA",
        }
    }
}

/// Why a connection could not be opened or a conversation broke.
#[derive(Debug)]
pub enum SmtpError {
    /// No TCP connection (refused, unreachable, no such host, timed out).
    Connect {
        /// `host:port`.
        peer: String,
        /// The error.
        err: io::Error,
    },
    /// The connection broke or a wait timed out.
    Io {
        /// `host[ip]:port`.
        peer: String,
        /// Where.
        stage: Stage,
        /// The error (`TimedOut` for a timeout).
        err: io::Error,
    },
    /// The server refused to go on (greeting, EHLO/HELO, STARTTLS, RSET).
    Refused {
        /// `host[ip]:port`.
        peer: String,
        /// Where.
        stage: Stage,
        /// What it said.
        reply: Reply,
    },
    /// The server's reply did not parse.
    Protocol {
        /// `host[ip]:port`.
        peer: String,
        /// Where.
        stage: Stage,
        /// What was wrong.
        what: String,
    },
    /// TLS was required and could not be had.
    Tls {
        /// What happened.
        what: String,
    },
    /// The message's content could not be read from the spool while it
    /// was being sent (the connection is dropped before the final dot).
    Spool {
        /// The read error.
        err: io::Error,
    },
}

impl fmt::Display for SmtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmtpError::Connect { peer, err } => write!(f, "connect to {peer}: {err}"),
            SmtpError::Io { peer, stage, err } if err.kind() == io::ErrorKind::TimedOut => {
                write!(
                    f,
                    "conversation with {peer} timed out while {}",
                    stage.doing()
                )
            }
            SmtpError::Io { peer, stage, err } => {
                write!(
                    f,
                    "lost connection with {peer} while {} ({err})",
                    stage.doing()
                )
            }
            SmtpError::Refused {
                peer,
                stage: Stage::Greeting,
                reply,
            } => write!(f, "host {peer} refused to talk to me: {reply}"),
            SmtpError::Refused { peer, stage, reply } => write!(
                f,
                "host {peer} said: {reply} (in reply to {} command)",
                stage.command()
            ),
            SmtpError::Protocol { peer, stage, what } => write!(
                f,
                "host {peer} broke the protocol while {}: {what}",
                stage.doing()
            ),
            SmtpError::Tls { what } => f.write_str(what),
            SmtpError::Spool { err } => {
                write!(f, "cannot read the message from the spool: {err}")
            }
        }
    }
}

impl std::error::Error for SmtpError {}

impl SmtpError {
    /// A deferral's detail for this error.
    pub fn detail(&self, remote: Option<&str>) -> Detail {
        let (dsn, reply) = match self {
            SmtpError::Connect { .. } => ("4.4.1".to_owned(), None),
            SmtpError::Io { .. } => ("4.4.2".to_owned(), None),
            SmtpError::Refused { reply, .. } => {
                // Deferred whatever the class: a server that will not talk
                // now may later (Postfix's smtp_skip_5xx_greeting).
                let dsn = reply.dsn();
                (format!("4{}", &dsn[1..]), Some(reply.to_string()))
            }
            SmtpError::Protocol { .. } => ("4.5.0".to_owned(), None),
            SmtpError::Tls { .. } => ("4.7.5".to_owned(), None),
            SmtpError::Spool { .. } => ("4.3.0".to_owned(), None),
        };
        Detail {
            dsn,
            text: self.to_string(),
            reply,
            remote: remote.map(str::to_owned),
        }
    }

    /// Whether the connection broke (rather than the server refusing).
    pub fn is_io(&self) -> bool {
        matches!(self, SmtpError::Io { .. })
    }
}
