//! What a check does with its cost: consume it when it fits (an ordinary check), only ask
//! whether the key has room (a usage policy's check, or an Envoy descriptor with `hits_addend`
//! 0), or charge what a request used after the fact, room or not, and refund it.
//!
//! Every algorithm applies a mode through one [`Plan`], so the arithmetic of the four modes is
//! written once per algorithm (and mirrored once per Lua script).

use crate::params::MAX_EXACT;

/// The largest balance a key's state holds, in its own units: a charge beyond it saturates, so
/// every number a script computes from a state (a balance plus a cost, an arrival time now
/// plus a debt) stays exact in a Lua double. 2^52 units: far beyond any real debt.
pub const MAX_BALANCE: u64 = MAX_EXACT / 2;

/// How a check treats its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Allowed when `cost` fits; consumes it then (`cost` 0 peeks).
    #[default]
    Consume,
    /// Allowed when `max(cost, 1)` fits; consumes `cost` then. A check that asks whether a key
    /// has anything left, consuming an estimate (often 0) of what it will use.
    Ask,
    /// Adds `cost` whether it fits or not: the balance may go below zero (a debt the key
    /// repays before it is allowed again). Answers as an [`Ask`](Mode::Ask) of 0 afterwards.
    Charge,
    /// Gives back `cost` (never above full); answers as an [`Ask`](Mode::Ask) of 0 afterwards.
    Refund,
}

impl Mode {
    /// The code the Redis scripts receive for this mode.
    pub fn code(self) -> u8 {
        match self {
            Mode::Consume => 0,
            Mode::Ask => 1,
            Mode::Charge => 2,
            Mode::Refund => 3,
        }
    }

    /// Whether this mode changes the balance unconditionally (charge or refund): only
    /// algorithms that can carry a debt take it.
    pub fn adjusts(self) -> bool {
        matches!(self, Mode::Charge | Mode::Refund)
    }

    /// What must fit for a check of `cost` in this mode to be allowed: the cost itself (an
    /// ordinary check), `max(cost, 1)` (an ask), 1 (a charge or refund, answered as an ask
    /// of 0 afterwards).
    pub fn need(self, cost: u64) -> u64 {
        self.plan(cost).need
    }

    /// What an algorithm does for a check of `cost` in this mode.
    pub(crate) fn plan(self, cost: u64) -> Plan {
        match self {
            Mode::Consume => Plan {
                need: cost,
                take: cost,
                add: 0,
                sub: 0,
            },
            Mode::Ask => Plan {
                need: cost.max(1),
                take: cost,
                add: 0,
                sub: 0,
            },
            Mode::Charge => Plan {
                need: 1,
                take: 0,
                add: cost,
                sub: 0,
            },
            Mode::Refund => Plan {
                need: 1,
                take: 0,
                add: 0,
                sub: cost,
            },
        }
    }
}

/// One check as an algorithm applies it: first `add` (saturating at [`MAX_BALANCE`]) or `sub`
/// (never below empty) unconditionally, then allowed when `need` fits, consuming `take` then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub need: u64,
    pub take: u64,
    pub add: u64,
    pub sub: u64,
}

impl Plan {
    /// `used` after the unconditional part, where one unit of cost is `unit` units of state,
    /// saturating at `ceiling` (at most [`MAX_BALANCE`]).
    pub(crate) fn adjust(&self, used: u64, unit: u64, ceiling: u64) -> u64 {
        used.saturating_add(self.add.saturating_mul(unit))
            .min(ceiling.max(used))
            .saturating_sub(self.sub.saturating_mul(unit))
    }
}

/// `(remaining, debt)` of a balance with `room` units of capacity left, or in debt by `-room`
/// units, in costs of `unit` units each: remaining rounds down, debt up (a key owing part of a
/// unit owes one).
pub(crate) fn remaining_and_debt(cap: u64, after: u64, unit: u64) -> (u64, u64) {
    if after <= cap {
        ((cap - after) / unit, 0)
    } else {
        (0, (after - cap).div_ceil(unit))
    }
}
