//! Who may reach the back door: the directory check, binding the socket with
//! mode 0600, the stale-socket rule, and the peer's credentials
//! (`SO_PEERCRED` on Linux and Android, `getpeereid` on BSD and macOS:
//! `sys::peer_credentials`).

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::UnixListener;

/// Listen backlog of the back door socket.
const BACKLOG: i32 = 128;

/// The effective uid of this process.
pub(crate) fn our_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn denied(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

/// The directory the socket goes in.
pub(crate) fn parent_dir(path: &Path) -> io::Result<PathBuf> {
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("back door: {} names no file", path.display()),
        ));
    }
    Ok(match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    })
}

/// Refuses a directory that another user owns, or (unless `allow_shared`)
/// one that group or others may write: whoever can write there can replace
/// the socket with their own.
pub(crate) fn check_dir(dir: &Path, allow_shared: bool) -> io::Result<()> {
    let md = fs::metadata(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("back door: directory {}: {e}", dir.display()),
        )
    })?;
    if !md.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("back door: {} is not a directory", dir.display()),
        ));
    }
    let me = our_uid();
    if md.uid() != me && md.uid() != 0 {
        return Err(denied(format!(
            "back door: refusing directory {}: it belongs to uid {}, not to this process \
             (uid {me}) or root",
            dir.display(),
            md.uid()
        )));
    }
    let mode = md.mode() & 0o7777;
    if !allow_shared && mode & 0o022 != 0 {
        return Err(denied(format!(
            "back door: refusing directory {}: mode {mode:04o} lets {} write there, and so \
             replace the socket; use a directory only its owner can write (mkdir -m 0700), \
             or allow_shared_directory(true)",
            dir.display(),
            if mode & 0o002 != 0 {
                "everyone"
            } else {
                "the group"
            }
        )));
    }
    Ok(())
}

/// Something is at `path` already: a stale socket of an earlier run is
/// removed; a live one, or anything that is not a socket, is an error.
fn clear_stale(path: &Path) -> io::Result<()> {
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !md.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "back door: {} exists and is not a socket; not touching it",
                path.display()
            ),
        ));
    }
    let probe =
        coro_runtime::with_timeout(Duration::from_secs(1), || crate::UnixStream::connect(path));
    match probe {
        Ok(Ok(_)) | Err(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "back door: a live socket is at {} (another process serves there)",
                path.display()
            ),
        )),
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => fs::remove_file(path),
        Ok(Err(e)) => Err(e),
    }
}

/// The identity of a socket file (device and inode), so that a back door
/// removes only the file it created.
pub(crate) type FileId = (u64, u64);

/// The [`FileId`] of what is at `path` now, if anything.
pub(crate) fn file_id(path: &Path) -> Option<FileId> {
    fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Binds the listening socket at `path` with mode 0600.
///
/// The mode is set between `bind` and `listen`: until `listen` no one can
/// connect, so there is no moment where the socket accepts with a wider mode.
pub(crate) fn bind(path: &Path) -> io::Result<(UnixListener, Option<FileId>)> {
    clear_stale(path)?;
    let sock = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    sock.bind(&socket2::SockAddr::unix(path)?)?;
    let listen = fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .and_then(|()| sock.listen(BACKLOG));
    if let Err(e) = listen {
        let _ = fs::remove_file(path);
        return Err(e);
    }
    let id = file_id(path);
    Ok((UnixListener::from_std(sock.into())?, id))
}

/// The credentials of a connected peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Peer {
    pub(crate) uid: u32,
    /// Its process id, where the OS tells (Linux, macOS).
    pub(crate) pid: Option<i32>,
}

/// Reads the peer's credentials, as the kernel recorded them at `connect`.
pub(crate) fn peer(fd: &impl AsRawFd) -> io::Result<Peer> {
    let c = crate::sys::peer_credentials(fd.as_raw_fd())?;
    Ok(Peer {
        uid: c.uid,
        pid: c.pid,
    })
}

/// Whether `peer` may use the back door: the process's own uid, or root.
pub(crate) fn allowed(peer: &Peer) -> bool {
    peer.uid == our_uid() || peer.uid == 0
}
