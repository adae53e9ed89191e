//! The file descriptors the daemon may hold: at start the soft limit is raised to the hard
//! one, and `listen.max_connections` is lowered below it, so that past the bound a client is
//! refused with an answer instead of the listener failing to accept (EMFILE) with the client
//! left hanging in the backlog.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use super::gate::MAX_REFUSING;

/// Descriptors kept for everything but client connections: the listeners, Redis connections,
/// the runtime, files and the log.
const RESERVED_FDS: u64 = 64;

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
    let headroom = RESERVED_FDS + MAX_REFUSING as u64;
    // A tiny limit still serves: half of it, at least one connection.
    let room = limit.saturating_sub(headroom).max(limit / 2).max(1);
    configured.min(usize::try_from(room).unwrap_or(usize::MAX))
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
}
