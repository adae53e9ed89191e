//! The file descriptors the daemon may hold: at start the soft limit is raised to the hard
//! one, and `listen.max_connections` is lowered below it, so that past the bound a client is
//! refused with an answer instead of the listener failing to accept (EMFILE) with the client
//! left hanging in the backlog. The descriptors left above the bound are the room for
//! lingering closes ([`super::linger`]): how many refused connections may linger at once
//! follows them.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors kept for everything but client connections: the listeners, Redis connections,
/// the runtime, files and the log.
const RESERVED_FDS: u64 = 64;

/// Descriptors kept for lingering closes at the least: `listen.max_connections` is lowered to
/// leave them.
const MIN_LINGERING_FDS: u64 = 64;

/// Descriptors left unused when the lingering slots are counted at start, for what opens
/// later: Redis reconnections, gRPC connections (outside the gate), each accept loop's spare.
const LATER_FDS: u64 = 32;

/// The most lingering closes at once whatever the descriptors: each holds a task and a small
/// buffer (about 3 KiB), so this bounds them to about 50 MiB.
pub const MAX_LINGERING: usize = 16_384;

/// The fd budget found at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// The soft limit found at start (`None`: unlimited).
    pub soft_before: Option<u64>,
    /// The soft limit now.
    pub limit: Option<u64>,
    /// `listen.max_connections` as configured.
    pub configured: usize,
    /// The bound the daemon enforces.
    pub max_connections: usize,
}

/// Raises the fd soft limit to the hard limit and caps `configured` connections below it.
/// A limit that cannot be raised is kept (and logged by the caller through the budget).
pub fn raise_and_cap(configured: usize) -> FdBudget {
    let before = getrlimit(Resource::Nofile);
    if before.current != before.maximum {
        let raised = Rlimit {
            current: before.maximum,
            maximum: before.maximum,
        };
        if let Err(err) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %err, "cannot raise the file descriptor limit");
        }
    }
    let limit = getrlimit(Resource::Nofile).current;
    FdBudget {
        soft_before: before.current,
        limit,
        configured,
        max_connections: cap(configured, limit),
    }
}

/// `configured`, lowered so that the connections, those being refused and the reserve fit in
/// `limit` descriptors.
pub fn cap(configured: usize, limit: Option<u64>) -> usize {
    let Some(limit) = limit else {
        return configured;
    };
    let headroom = RESERVED_FDS + MIN_LINGERING_FDS;
    // A tiny limit still serves: half of it, at least one connection.
    let room = limit.saturating_sub(headroom).max(limit / 2).max(1);
    configured.min(usize::try_from(room).unwrap_or(usize::MAX))
}

/// How many closes may linger at once next to `max_connections` open connections: the
/// descriptors of the limit not open now, less the bound and a margin for what opens later.
/// Counted once at start, after the listeners are bound.
pub fn lingering_slots(max_connections: usize) -> usize {
    let in_use = std::fs::read_dir("/proc/self/fd").map_or(RESERVED_FDS, |dir| dir.count() as u64);
    spare(getrlimit(Resource::Nofile).current, in_use, max_connections)
}

/// The lingering slots `limit` descriptors leave with `in_use` open and `max_connections`.
fn spare(limit: Option<u64>, in_use: u64, max_connections: usize) -> usize {
    let Some(limit) = limit else {
        return MAX_LINGERING;
    };
    let spare = limit
        .saturating_sub(in_use)
        .saturating_sub(max_connections as u64)
        .saturating_sub(LATER_FDS);
    // Even without spare descriptors, one close at a time lingers (a descriptor a
    // connection gives back is reused).
    usize::try_from(spare).map_or(MAX_LINGERING, |spare| spare.clamp(1, MAX_LINGERING))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_headroom_below_the_limit() {
        assert_eq!(cap(10_000, Some(256)), 128);
        assert_eq!(cap(10_000, Some(1_048_576)), 10_000);
        assert_eq!(cap(10_000, Some(4_096)), 3_968);
        assert_eq!(cap(10_000, Some(100)), 50);
        assert_eq!(cap(10_000, Some(0)), 1);
        assert_eq!(cap(64, None), 64);
    }

    #[test]
    fn lingering_closes_follow_the_spare_descriptors() {
        // nofile 256: 128 connections, 12 descriptors open at start.
        assert_eq!(spare(Some(256), 12, 128), 84);
        assert_eq!(spare(Some(1024), 12, cap(10_000, Some(1024))), 84);
        assert_eq!(spare(Some(65_536), 20, 10_000), 55_484.min(MAX_LINGERING));
        assert_eq!(spare(Some(100), 12, 50), 6);
        assert_eq!(spare(Some(64), 60, 32), 1);
        assert_eq!(spare(None, 12, 10_000), MAX_LINGERING);
    }
}
