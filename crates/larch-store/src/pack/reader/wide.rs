//! The size of a record's first read: [`FIRST_READ`] bytes, or the rest of its page while most
//! records read are larger ([`WideReads`]).

use super::FIRST_READ;
use std::sync::atomic::Ordering;

/// A page of the page cache. While most records read are larger than [`FIRST_READ`] (a context
/// far larger than the cache, whose misses are mostly the inode nodes of huge directories,
/// 0.3–2 KB each), the first read of a record goes to the end of its page instead (at least
/// [`FIRST_READ`] bytes), so that a record under a page takes one read call, not two, and no read
/// touches a page it does not need ([`WideReads`]).
pub(super) const PAGE: u64 = 4096;

/// Whether the first read of a record is [`FIRST_READ`] bytes or the rest of its page: a score
/// that each record read moves up by one if it was larger than [`FIRST_READ`], down by one if not,
/// within `0..=WIDE_SCORE_MAX`; above half of it, reads are wide. So reads widen once more than
/// half of the records read need a second read (the mainnet rung), and stay narrow where most
/// records are small (the default trace, whose misses are mostly patches and small directories).
#[derive(Debug, Default)]
pub(super) struct WideReads {
    score: std::sync::atomic::AtomicU32,
}

/// The highest [`WideReads`] score.
const WIDE_SCORE_MAX: u32 = 256;

impl WideReads {
    /// Whether a first read is wide now.
    pub(super) fn wide(&self) -> bool {
        self.score.load(Ordering::Relaxed) > WIDE_SCORE_MAX / 2
    }

    /// Counts a record of `total` bytes (a plain load and store: racing readers may lose a step,
    /// which only delays the switch).
    pub(super) fn note(&self, total: u64) {
        let score = self.score.load(Ordering::Relaxed);
        let next = if total > FIRST_READ { (score + 1).min(WIDE_SCORE_MAX) } else { score.saturating_sub(1) };
        if next != score {
            self.score.store(next, Ordering::Relaxed);
        }
    }

    /// Bytes of the first read of a record at `offset`.
    pub(super) fn first_read(&self, offset: u64) -> u64 {
        if !self.wide() {
            return FIRST_READ;
        }
        let rest = PAGE - offset % PAGE;
        if rest < FIRST_READ { rest + PAGE } else { rest }
    }
}

/// What a read is for, which sizes its first read: the records of inodes (a large directory's
/// inner inodes and leaves, [`larch_core::ObjectSource::load_inode`]) are mostly larger than
/// [`FIRST_READ`] where the other records read mostly are not, so each kind has its own
/// [`WideReads`] score ([`ReadWidths`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadKind {
    /// A directory, a contents value, a commit, or a record of unknown kind.
    Other,
    /// An inode below a large directory's root (and the bases of its patch chain).
    Inode,
}

/// The [`WideReads`] score of each [`ReadKind`].
#[derive(Debug, Default)]
pub(super) struct ReadWidths {
    other: WideReads,
    inodes: WideReads,
}

impl ReadWidths {
    /// The score of the reads of `kind`.
    pub(super) fn of(&self, kind: ReadKind) -> &WideReads {
        match kind {
            ReadKind::Other => &self.other,
            ReadKind::Inode => &self.inodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_widen_when_most_records_are_large_and_narrow_back() {
        let wide = WideReads::default();
        assert_eq!(wide.first_read(5000), FIRST_READ);
        // One large record in three: narrow.
        for i in 0..3 * WIDE_SCORE_MAX {
            wide.note(if i % 3 == 0 { 2000 } else { 100 });
        }
        assert!(!wide.wide());
        // Two in three: wide, to the end of the page (through the next one when little is left).
        for i in 0..3 * WIDE_SCORE_MAX {
            wide.note(if i % 3 == 0 { 100 } else { 2000 });
        }
        assert!(wide.wide());
        assert_eq!(wide.first_read(PAGE * 3 + 100), PAGE - 100);
        assert_eq!(wide.first_read(PAGE * 3), PAGE);
        assert_eq!(wide.first_read(PAGE * 4 - 10), PAGE + 10);
        // Small records again: narrow.
        for _ in 0..WIDE_SCORE_MAX {
            wide.note(FIRST_READ);
        }
        assert!(!wide.wide());
        assert_eq!(wide.first_read(PAGE * 3 + 100), FIRST_READ);
    }
}
