//! Reads the profiles that coro's profiler writes.
//!
//! `coro::profile` records where a runtime's time went and saves it as a
//! file of JSON lines (`Profile::save`, or the back door's
//! `profile dump PATH`); the format is documented with the profiler. This
//! crate reads such a file back into the [`Profile`] the runtime recorded
//! ([`load`], [`read`]), and its binary, `coro-profile`, turns one into
//! something to read:
//!
//! ```text
//! coro-profile report PROFILE [-o REPORT.html]   one self-contained HTML page
//! coro-profile diff A B                          what changed between two runs
//! coro-profile show PROFILE                      the entries as a text table
//! ```
//!
//! The reader accepts every file of a format version up to
//! [`FORMAT_VERSION`], ignores keys and line types it does not know (a
//! later minor addition still reads), and refuses a newer version with an
//! error that says so.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! let file = concat!(
//!     r#"{"type":"header","format":"coro-profile","version":1,"program":"relay","#,
//!     r#""pid":42,"start_unix_ns":1700000000000000000,"wall_ns":2000000000}"#, "\n",
//!     r#"{"type":"entry","kind":"region","name":"parse","calls":12,"wall_ns":1500000000,"#,
//!     r#""utime_ns":1490000000}"#, "\n",
//! );
//! let p: coro::profile::Profile = coro_profile::read(file.as_bytes())?;
//! assert_eq!(p.program, "relay");
//! let parse = p.entry("parse").unwrap();
//! assert_eq!(parse.wall, Duration::from_millis(1500));
//! assert_eq!(parse.usage.cpu(), Duration::from_millis(1490));
//! # Ok::<(), std::io::Error>(())
//! ```

mod read;

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

pub use coro_runtime::profile::{Entry, Kind, Profile, Slice, Usage, Warning};

/// The newest format version this crate reads: the one the runtime it is
/// built with writes.
pub const FORMAT_VERSION: u64 = coro_runtime::profile::FORMAT_VERSION;

/// Reads a profile in the file format.
///
/// # Errors
///
/// Those of `r`; `InvalidData` naming the line and the problem for text
/// that is not a profile, or one of a newer format version.
pub fn read<R: BufRead>(r: R) -> io::Result<Profile> {
    read::read(r)
}

/// Reads a profile file.
///
/// # Errors
///
/// As [`read`], and those of opening the file.
pub fn load<P: AsRef<Path>>(path: P) -> io::Result<Profile> {
    read(BufReader::new(File::open(path)?))
}
