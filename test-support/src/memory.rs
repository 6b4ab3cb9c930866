//! Memory of this process, as the kernel counts it: for tests that check
//! that pages are given back. Linux only (`/proc`, `mincore`).

/// The page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Resident bytes of this process (`/proc/self/statm`).
pub fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * page_size()
}

/// Of the pages the `len`-byte buffers at `bufs` lie on (whatever the page
/// size): how many, and how many are resident (`mincore`). Unlike the
/// process's resident set, this counts only those pages: not the
/// allocator's, nor an emulator's own memory.
///
/// # Panics
///
/// When `mincore` fails: a buffer is not (or no longer) mapped.
pub fn resident_pages(bufs: &[usize], len: usize) -> (usize, usize) {
    let page = page_size();
    let (mut total, mut resident) = (0, 0);
    for &b in bufs {
        let lo = b / page * page;
        let hi = (b + len).next_multiple_of(page);
        let mut vec = vec![0u8; (hi - lo) / page];
        // SAFETY: mincore only reads the page tables of [lo, hi) and writes
        // one byte per page into `vec`, which has one entry per page. An
        // unmapped range is an ENOMEM return, not undefined behaviour, and
        // it is asserted on below.
        let rc =
            unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr().cast()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        total += vec.len();
        resident += vec.iter().filter(|&&v| v & 1 != 0).count();
    }
    (total, resident)
}

/// Checks the whole process's resident set around a test that touched
/// stacks and let them go: `before` the stacks, with them `parked`, and
/// `after` their release. Touching them must have cost over 100 MiB, and
/// less than `left_mib` MiB may stay. Under an emulator the bound is skipped
/// (said on stderr, for `test`): the emulator's own per-page records of the
/// stacks' address space count in this process's RSS and are not given
/// back.
#[track_caller]
pub fn assert_rss_given_back(
    test: &str,
    before: usize,
    parked: usize,
    after: usize,
    left_mib: usize,
) {
    if let Some(emulator) = crate::child::emulator() {
        crate::child::skip(
            test,
            &format!(
                "the whole-process RSS bound: under {emulator} RSS counts the \
                 emulator's per-page records of the stacks' address space"
            ),
        );
        return;
    }
    assert!(parked > before + (100 << 20), "touched {}", parked - before);
    assert!(
        after < before + (left_mib << 20),
        "{} MiB still resident",
        (after - before) >> 20
    );
}
