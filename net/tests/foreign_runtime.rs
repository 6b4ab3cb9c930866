//! A socket belongs to the runtime it was created in: used in another
//! runtime it fails with a clear error instead of waiting forever.

use std::io::{self, Read};
use std::time::Duration;

use coro::net::UnixStream;

/// A socket created in one runtime and waited on in another fails at once
/// with an error that names the mix-up.
#[test]
fn a_socket_from_another_runtime_fails_fast() -> io::Result<()> {
    let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    let mut first = coro::Runtime::new()?;
    let s = first.block_on(move || UnixStream::from_std(a))?;
    let mut second = coro::Runtime::new()?;
    second.block_on(move || {
        let r = coro::with_timeout(Duration::from_secs(20), || (&s).read(&mut [0u8; 8]));
        let e = r
            .expect("failed at once, not timed out")
            .expect_err("nothing to read");
        assert!(e.to_string().contains("registered with runtime"), "{e}");
        assert_ne!(e.kind(), io::ErrorKind::TimedOut);
        Ok(())
    })
}
