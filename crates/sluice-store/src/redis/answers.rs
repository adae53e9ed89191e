//! What the scripts answer, read back into decisions: the eight fields of a check or batch
//! script per check ([`Outcome`]), and the four of a group call ([`GroupAnswer`]). Kept apart
//! from the calls so the lone check, the group and the batch read answers with one copy of
//! each reader.

use sluice_core::Decision;

use crate::error::StoreError;

/// What one check or batch script answers for one check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    pub decision: Decision,
    /// `remaining` and `reset_ms` of the state before this check (a cost-0 peek).
    pub before_remaining: u64,
    pub before_reset_ms: u64,
    /// What the refund script needs to find this consumption again.
    pub token: u64,
}

/// Fields a check or batch script answers per check.
pub(crate) const FIELDS: usize = 8;

fn n(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The [`Outcome`] of one check from its [`FIELDS`] fields.
pub(crate) fn outcome(limit: u64, fields: &[i64]) -> Result<Outcome, StoreError> {
    let &[
        allowed,
        remaining,
        reset,
        retry,
        delay,
        before_remaining,
        before_reset,
        token,
    ] = fields
    else {
        return Err(StoreError::Backend(format!(
            "script answered {} fields, expected {FIELDS}",
            fields.len()
        )));
    };
    Ok(Outcome {
        decision: Decision {
            allowed: allowed == 1,
            limit,
            remaining: n(remaining),
            reset_ms: n(reset),
            retry_after_ms: n(retry),
            delay_ms: n(delay),
        },
        before_remaining: n(before_remaining),
        before_reset_ms: n(before_reset),
        token: n(token),
    })
}

/// Fields the group script answers per check: allowed (1, 0, or -1 for not run), remaining,
/// reset and the wait (retry_after when denied, delay when allowed), each a little-endian
/// double.
const GROUP_FIELDS: usize = 4;
/// Bytes of one check's answer.
const GROUP_ANSWER_BYTES: usize = GROUP_FIELDS * 8;

/// What a group call answered for one of its checks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum GroupAnswer {
    Decided(Decision),
    /// Its key is not on the node the call reached (its slot moved, or is moving): nothing
    /// was written, and it goes again alone.
    NotRun,
}

/// The answers of a group call of `checks` checks of `limits`, from its reply:
/// [`GROUP_FIELDS`] doubles per check, in order.
pub(crate) fn group_answers(
    reply: &[u8],
    checks: usize,
    limits: impl Iterator<Item = u64>,
) -> Result<Vec<GroupAnswer>, StoreError> {
    if reply.len() != GROUP_ANSWER_BYTES * checks {
        return Err(StoreError::Backend(format!(
            "group script answered {} bytes for {checks} checks, expected {}",
            reply.len(),
            GROUP_ANSWER_BYTES * checks
        )));
    }
    // The doubles hold integers (Lua numbers); `as` saturates anything else.
    #[allow(clippy::cast_possible_truncation)]
    let field = |bytes: &[u8]| -> i64 {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(bytes);
        f64::from_le_bytes(raw) as i64
    };
    Ok(reply
        .chunks_exact(GROUP_ANSWER_BYTES)
        .zip(limits)
        .map(|(check, limit)| {
            let mut fields = check.chunks_exact(8).map(field);
            let mut next = || fields.next().unwrap_or(0);
            let (allowed, remaining, reset, wait) = (next(), next(), next(), next());
            if allowed == -1 {
                return GroupAnswer::NotRun;
            }
            let allowed = allowed == 1;
            GroupAnswer::Decided(Decision {
                allowed,
                limit,
                remaining: n(remaining),
                reset_ms: n(reset),
                retry_after_ms: if allowed { 0 } else { n(wait) },
                delay_ms: if allowed { n(wait) } else { 0 },
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decided(answer: &GroupAnswer) -> Option<(bool, u64, u64, u64, u64)> {
        match answer {
            GroupAnswer::Decided(d) => Some((
                d.allowed,
                d.remaining,
                d.reset_ms,
                d.retry_after_ms,
                d.delay_ms,
            )),
            GroupAnswer::NotRun => None,
        }
    }

    fn reply(fields: &[f64]) -> Vec<u8> {
        fields.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    #[test]
    fn a_group_reply_is_four_doubles_per_check() {
        let reply = reply(&[
            1.0, 9.0, 1e12, 25.0, 0.0, 0.0, 2000.0, 1500.0, -1.0, 0.0, 0.0, 0.0,
        ]);
        let answers = group_answers(&reply, 3, [10, 10, 10].into_iter()).unwrap_or_default();
        assert_eq!(answers.len(), 3);
        // Allowed: the wait is a delay. Denied: a retry. -1: not run.
        assert_eq!(
            decided(&answers[0]),
            Some((true, 9, 1_000_000_000_000, 0, 25))
        );
        assert_eq!(decided(&answers[1]), Some((false, 0, 2000, 1500, 0)));
        assert_eq!(answers[2], GroupAnswer::NotRun);
    }

    #[test]
    fn a_group_reply_of_the_wrong_length_is_an_error() {
        for bytes in [0, 31, 33, 64] {
            let reply = vec![0u8; bytes];
            assert!(
                group_answers(&reply, 1, [1].into_iter()).is_err(),
                "{bytes}"
            );
        }
    }

    #[test]
    fn a_check_answer_is_eight_fields() {
        let o = outcome(10, &[1, 9, 1000, 0, 0, 10, 0, 7]).ok();
        assert_eq!(o.map(|o| (o.decision.remaining, o.token)), Some((9, 7)));
        assert!(outcome(10, &[1, 9]).is_err());
    }
}
