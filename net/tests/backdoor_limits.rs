//! When the back door is full, the session that has
//! waited longest for a command gives way to a newcomer (forgotten `socat`
//! windows never lock the owner out), and a session running a command is
//! never cut.

mod util;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use coro::net::backdoor;
use util::TempDir;

/// Set by the test to end the `hold` command.
static RELEASE: AtomicBool = AtomicBool::new(false);

/// Reads from `c` until `needle` has arrived or the peer closed; returns
/// everything read.
fn read_until(c: &mut StdUnixStream, needle: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains(needle) {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!(
                "reading from the back door: {e}; got {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A client that has been greeted and is at the prompt.
fn connect(path: &Path) -> StdUnixStream {
    let mut c = StdUnixStream::connect(path).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let greeting = read_until(&mut c, "> ");
    assert!(greeting.starts_with("coro back door"), "{greeting:?}");
    c
}

#[test]
fn a_full_back_door_closes_its_longest_idle_session_for_a_newcomer() {
    let dir = TempDir::new("bd-evict").unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock = dir.path("bd");
    let (evicted, turned_away) = util::run(move || {
        let door = backdoor::Builder::new(&sock)
            .max_sessions(3)
            .command("hold", "runs until the test releases it", |s, _| {
                writeln!(s, "holding")?;
                s.flush()?;
                while !RELEASE.load(Ordering::SeqCst) {
                    coro::sleep(Duration::from_millis(5))?;
                }
                writeln!(s, "released")
            })?
            .serve()?;
        let path = door.path().to_owned();
        coro::blocking(move || {
            // A session busy running a command...
            let mut busy = connect(&path);
            busy.write_all(b"hold\n").unwrap();
            assert!(read_until(&mut busy, "holding").contains("holding"));
            // ...and two forgotten windows fill the back door.
            let mut oldest = connect(&path);
            let mut older = connect(&path);
            // The owner comes back: served; the longest idle gives way.
            let mut owner = connect(&path);
            let bye = read_until(&mut oldest, "closing it for a newcomer");
            assert!(bye.contains("closing it for a newcomer"), "{bye:?}");
            owner.write_all(b"stats\n").unwrap();
            let stats = read_until(&mut owner, "backdoor_evicted");
            assert!(stats.contains("backdoor_sessions    3"), "{stats}");
            // Once more: the next idlest gives way, never the busy one.
            let _again = connect(&path);
            let bye = read_until(&mut older, "closing it for a newcomer");
            assert!(bye.contains("closing it for a newcomer"), "{bye:?}");
            let _third = connect(&path);
            let bye = read_until(&mut owner, "closing it for a newcomer");
            assert!(bye.contains("closing it for a newcomer"), "{bye:?}");
            RELEASE.store(true, Ordering::SeqCst);
            let done = read_until(&mut busy, "released");
            assert!(
                done.contains("released"),
                "the busy session was cut: {done:?}"
            );
        })?;
        let out = (door.evicted(), door.turned_away());
        door.close();
        Ok(out)
    })
    .unwrap();
    assert_eq!(evicted, 3);
    assert_eq!(turned_away, 0);
}

#[test]
fn a_full_back_door_whose_sessions_all_run_commands_turns_the_newcomer_away() {
    let dir = TempDir::new("bd-busy").unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock = dir.path("bd");
    let turned_away = util::run(move || {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let door = backdoor::Builder::new(&sock)
            .max_sessions(2)
            .command("wait", "runs until the test ends it", move |s, _| {
                writeln!(s, "waiting")?;
                s.flush()?;
                while !d2.load(Ordering::SeqCst) {
                    coro::sleep(Duration::from_millis(5))?;
                }
                Ok(())
            })?
            .serve()?;
        let path = door.path().to_owned();
        coro::blocking(move || {
            let mut a = connect(&path);
            a.write_all(b"wait\n").unwrap();
            read_until(&mut a, "waiting");
            let mut b = connect(&path);
            b.write_all(b"wait\n").unwrap();
            read_until(&mut b, "waiting");
            let mut c = StdUnixStream::connect(&path).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let told = read_until(&mut c, "try again later");
            assert!(told.starts_with("back door busy"), "{told:?}");
            done.store(true, Ordering::SeqCst);
        })?;
        let n = door.turned_away();
        door.close();
        Ok(n)
    })
    .unwrap();
    assert_eq!(turned_away, 1);
}
