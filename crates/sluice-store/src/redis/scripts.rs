//! The Lua scripts sluice runs on Redis, assembled at compile time from the files under
//! `lua/`, and the one way they are run: EVALSHA, and on NOSCRIPT (a restarted server,
//! `SCRIPT FLUSH`, a promoted replica) the script loaded (one server) or sent as EVAL to that
//! node (a cluster) once, so a script is never re-sent per call.
//!
//! Each script is `common.lua` (the helpers every script shares) followed by the algorithm
//! functions it needs and its main part:
//! - one check script per algorithm family (`fixed_window`, `sliding_window_counter`,
//!   `sliding_window_log`, `token_bucket`, and `gcra`, which also serves leaky_bucket);
//! - `batch`: several checks whose keys share one slot, decided in order and committed only
//!   if every one is allowed (on a single Redis every batch is one `batch` call), then the
//!   candidate limits judged beside some of them, each on its own;
//! - `group`: checks that queued behind a call in flight, decided each on its own in one
//!   call (group commit, see `group.rs`), a check's candidate limit as one more entry beside
//!   it; also a lone check with a candidate (two entries);
//! - `refund`: gives back what checks consumed, for cross-slot batches on a cluster
//!   (consume-then-refund);
//! - `replicated` and `merge`: the window counters of `scope = "replicated"`, the first
//!   weighting its sliding window with the same `window.lua` as the check scripts;
//! - `key_command` and `replace_hash`: the overrides' reads and writes, one key each (their
//!   keys span slots on a cluster).
//!
//! `now` always comes from the daemon as ARGV, so Redis and the core decide on the same time.

use sluice_core::{Algorithm, Counting, Params};

/// The concatenation of `lua/` files, at compile time.
macro_rules! lua {
    ($($file:literal),+ $(,)?) => {
        concat!($(include_str!(concat!("lua/", $file))),+)
    };
}

/// A check script: the helpers, the algorithm's files, `ALGORITHM` bound to its function
/// and `check.lua`, the main part every check script shares.
macro_rules! check_script {
    ($function:literal in $($file:literal),+) => {
        concat!(
            lua!("common.lua", $($file),+),
            "local ALGORITHM = ",
            $function,
            "\n",
            lua!("check.lua")
        )
    };
}

/// Every algorithm's functions and the table of them by code, for the scripts that run any
/// algorithm (batch, group, refund): the window weighting before the sliding window counter that
/// uses it.
macro_rules! algorithms {
    ($($main:literal),+) => {
        lua!(
            "common.lua",
            "window.lua",
            "fixed_window.lua",
            "sliding_window_counter.lua",
            "sliding_window_log.lua",
            "token_bucket.lua",
            "gcra.lua",
            "algorithms.lua",
            $($main),+
        )
    };
}

/// Which script to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptId {
    FixedWindow,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
    /// gcra and leaky_bucket (one state, a flag tells them apart).
    Gcra,
    Batch,
    /// Checks decided each on its own in one call (group commit).
    Group,
    Refund,
    /// Replicated window counters (scope = "replicated"), see `replicated.rs`.
    Replicated,
    /// max()-merge of per-region totals and acknowledgements.
    Merge,
    /// One command on one key, answering its reply as strings.
    KeyCommand,
    /// A hash replaced whole (an override).
    ReplaceHash,
}

impl ScriptId {
    /// Every script, in [`index`](Self::index) order.
    pub(crate) const ALL: [ScriptId; 12] = [
        ScriptId::FixedWindow,
        ScriptId::SlidingWindowCounter,
        ScriptId::SlidingWindowLog,
        ScriptId::TokenBucket,
        ScriptId::Gcra,
        ScriptId::Batch,
        ScriptId::Group,
        ScriptId::Refund,
        ScriptId::Replicated,
        ScriptId::Merge,
        ScriptId::KeyCommand,
        ScriptId::ReplaceHash,
    ];

    /// The check script of `algorithm`.
    pub(crate) fn check(algorithm: Algorithm) -> ScriptId {
        match algorithm {
            Algorithm::FixedWindow => ScriptId::FixedWindow,
            Algorithm::SlidingWindowCounter => ScriptId::SlidingWindowCounter,
            Algorithm::SlidingWindowLog => ScriptId::SlidingWindowLog,
            Algorithm::TokenBucket => ScriptId::TokenBucket,
            Algorithm::Gcra | Algorithm::LeakyBucket => ScriptId::Gcra,
        }
    }

    /// Position in [`ALL`](Self::ALL), where [`Scripts`] keeps the script.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The script's Lua source.
    pub(crate) fn source(self) -> &'static str {
        match self {
            ScriptId::FixedWindow => check_script!("fixed_window" in "fixed_window.lua"),
            ScriptId::SlidingWindowCounter => check_script!(
                "sliding_window_counter" in "window.lua", "sliding_window_counter.lua"
            ),
            ScriptId::SlidingWindowLog => {
                check_script!("sliding_window_log" in "sliding_window_log.lua")
            }
            ScriptId::TokenBucket => check_script!("token_bucket" in "token_bucket.lua"),
            ScriptId::Gcra => check_script!("gcra" in "gcra.lua"),
            ScriptId::Batch => algorithms!("batch.lua"),
            ScriptId::Group => algorithms!("group.lua"),
            ScriptId::Refund => algorithms!("refund.lua"),
            ScriptId::Replicated => lua!("common.lua", "window.lua", "replicated.lua"),
            ScriptId::Merge => lua!("merge.lua"),
            ScriptId::KeyCommand => lua!("key_command.lua"),
            ScriptId::ReplaceHash => lua!("replace_hash.lua"),
        }
    }
}

/// A script as both clients send it: EVALSHA of its SHA1, and its source for the one call
/// after a NOSCRIPT answer.
#[derive(Debug)]
pub(crate) struct Script {
    source: &'static str,
    sha1: String,
}

impl Script {
    fn new(id: ScriptId) -> Script {
        let source = id.source();
        Script {
            source,
            // The redis crate hashes as Redis does; no SHA1 crate of our own for 12 scripts.
            sha1: ::redis::Script::new(source).get_hash().to_owned(),
        }
    }

    /// The Lua source (EVAL, SCRIPT LOAD).
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// The SHA1 Redis caches it under (EVALSHA).
    pub(crate) fn sha1(&self) -> &str {
        &self.sha1
    }
}

/// Every script of one store, hashed once when the store is made.
#[derive(Debug)]
pub(crate) struct Scripts([Script; ScriptId::ALL.len()]);

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts(ScriptId::ALL.map(Script::new))
    }

    /// The script `id` names.
    pub(crate) fn get(&self, id: ScriptId) -> &Script {
        // In bounds: the array has a script per id, at its index (a test says so).
        &self.0[id.index()]
    }
}

/// A limit's parameters as the batch, group and refund scripts take them at `now_ms`: its
/// code in their dispatch tables (`algorithms.lua`), limit, window and burst. A calendar
/// window (code 7) is sent as the uniform frame of the window holding `now_ms`: its length as
/// the window and its origin in burst's place, which fixed_window ignores (see
/// `sluice_core::calendar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wire {
    pub code: u64,
    pub limit: u64,
    pub window_ms: u64,
    pub burst: i64,
}

impl Wire {
    pub(crate) fn of(params: &Params, now_ms: u64) -> Wire {
        let burst = i64::try_from(params.burst).unwrap_or(i64::MAX);
        let plain = Wire {
            code: algorithm_code(params),
            limit: params.limit,
            window_ms: params.window_ms,
            burst,
        };
        match params.calendar {
            Some(calendar) => {
                let frame = calendar.frame(now_ms);
                Wire {
                    code: CALENDAR_CODE,
                    window_ms: frame.window_ms(),
                    burst: frame.origin_ms(),
                    ..plain
                }
            }
            None => plain,
        }
    }
}

/// The code of fixed_window over calendar windows.
const CALENDAR_CODE: u64 = 7;

/// The code of a limit's algorithm in the scripts' dispatch tables (`algorithms.lua`):
/// fixed_window counting every hit has a code of its own, and so do calendar windows
/// ([`Wire`]).
fn algorithm_code(params: &Params) -> u64 {
    match params.algorithm {
        Algorithm::FixedWindow if params.counting == Counting::EveryHit => 6,
        Algorithm::FixedWindow => 0,
        Algorithm::SlidingWindowCounter => 1,
        Algorithm::SlidingWindowLog => 2,
        Algorithm::TokenBucket => 3,
        Algorithm::Gcra => 4,
        Algorithm::LeakyBucket => 5,
    }
}

/// The flag a check script's algorithm function takes last (ARGV 6 of `check.lua`):
/// leaky_bucket's mode of gcra, or fixed_window counting every hit.
pub(crate) fn mode_flag(params: &Params) -> u64 {
    u64::from(params.algorithm == Algorithm::LeakyBucket || params.counting == Counting::EveryHit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_sits_at_its_index() {
        for (i, id) in ScriptId::ALL.iter().enumerate() {
            assert_eq!(id.index(), i);
            assert!(!id.source().is_empty());
        }
        let scripts = Scripts::new();
        for id in ScriptId::ALL {
            assert_eq!(scripts.get(id).source(), id.source());
            assert_eq!(scripts.get(id).sha1().len(), 40);
        }
    }

    #[test]
    fn the_window_weighting_is_written_once() {
        let weighting = "math.floor(previous * (w - elapsed) / w)";
        for id in ScriptId::ALL {
            assert!(id.source().matches(weighting).count() <= 1, "{id:?}");
        }
        assert!(
            ScriptId::Replicated
                .source()
                .contains("local function swc_used")
        );
    }
}
