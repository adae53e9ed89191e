//! Parsed lines in batches: what a file's reader thread hands to the replay. A batch owns one
//! byte arena holding every line's key and tier, so parsing a line allocates nothing, and
//! batches go back to their reader to be reused.

/// Which policies a line is replayed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PolicyPick {
    /// Every policy (no CSV `policy` column value and no `--policy`).
    All,
    /// The policy at this index of the replayed set.
    One(u32),
}

/// A byte range of a batch's arena.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ArenaRange {
    pub start: u32,
    pub end: u32,
}

/// One parsed line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line {
    /// The line's own time, unix ms.
    pub at_ms: u64,
    /// 1-based line number in its file.
    pub number: u64,
    pub key: ArenaRange,
    /// Empty: no tier.
    pub tier: ArenaRange,
    pub policy: PolicyPick,
    pub cost: u64,
}

/// Parsed lines of one file, in file order.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub arena: Vec<u8>,
    pub lines: Vec<Line>,
}

/// Lines per batch: large enough that the channel hand-off is a small share of the work,
/// small enough that a few batches in flight per file stay a few hundred KiB.
pub(crate) const BATCH_LINES: usize = 4096;

/// Arena bytes past which a batch is handed over whatever its line count.
pub(crate) const BATCH_ARENA_BYTES: usize = 16 << 20;

impl Batch {
    pub(crate) fn with_capacity() -> Self {
        Batch {
            arena: Vec::with_capacity(BATCH_LINES * 32),
            lines: Vec::with_capacity(BATCH_LINES),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.arena.clear();
        self.lines.clear();
    }

    /// Full at [`BATCH_LINES`] lines or [`BATCH_ARENA_BYTES`] of keys (lines are at most
    /// [`crate::source::MAX_LINE`] long, so arena offsets stay far below `u32::MAX`).
    pub(crate) fn is_full(&self) -> bool {
        self.lines.len() >= BATCH_LINES || self.arena.len() >= BATCH_ARENA_BYTES
    }

    pub(crate) fn bytes(&self, range: ArenaRange) -> &[u8] {
        &self.arena[range.start as usize..range.end as usize]
    }
}
