//! What the scripts answer, read back into decisions: the eight fields of a check or batch
//! script per check ([`Outcome`]), and the four of a group call ([`GroupAnswer`]). Kept apart
//! from the calls so the lone check, the group and the batch read answers with one copy of
//! each reader.

use sluice_core::Decision;

use crate::StoreError;

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
/// reset and the wait (retry_after when denied, delay when allowed).
const GROUP_FIELDS: usize = 4;

/// What a group call answered for one of its checks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum GroupAnswer {
    Decided(Decision),
    /// Its key is not on the node the call reached (its slot moved, or is moving): nothing
    /// was written, and it goes again alone.
    NotRun,
}

/// The answers of a group call of checks of `limits`, from its reply: one string of
/// [`GROUP_FIELDS`] space-separated integers per check.
pub(crate) fn group_answers(
    reply: &[String],
    limits: impl ExactSizeIterator<Item = u64>,
) -> Result<Vec<GroupAnswer>, StoreError> {
    let [text] = reply else {
        return Err(StoreError::Backend(format!(
            "group script answered {} values, expected one string",
            reply.len()
        )));
    };
    let fields = text
        .split(' ')
        .map(|field| {
            field.parse::<i64>().map_err(|_| {
                StoreError::Backend(format!("group script answered {field:?} for an integer"))
            })
        })
        .collect::<Result<Vec<i64>, _>>()?;
    let checks = limits.len();
    if fields.len() != GROUP_FIELDS * checks {
        return Err(StoreError::Backend(format!(
            "group script answered {} fields for {checks} checks",
            fields.len()
        )));
    }
    Ok(fields
        .chunks_exact(GROUP_FIELDS)
        .zip(limits)
        .map(|(check, limit)| match *check {
            [-1, ..] => GroupAnswer::NotRun,
            [allowed, remaining, reset, wait] => {
                let allowed = allowed == 1;
                GroupAnswer::Decided(Decision {
                    allowed,
                    limit,
                    remaining: n(remaining),
                    reset_ms: n(reset),
                    retry_after_ms: if allowed { 0 } else { n(wait) },
                    delay_ms: if allowed { n(wait) } else { 0 },
                })
            }
            _ => GroupAnswer::NotRun,
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

    #[test]
    fn a_group_reply_is_four_integers_per_check() {
        let reply = vec!["1 9 1000 25 0 0 2000 1500 -1 0 0 0".to_owned()];
        let answers = group_answers(&reply, [10, 10, 10].into_iter()).unwrap_or_default();
        assert_eq!(answers.len(), 3);
        // Allowed: the wait is a delay. Denied: a retry. -1: not run.
        assert_eq!(decided(&answers[0]), Some((true, 9, 1000, 0, 25)));
        assert_eq!(decided(&answers[1]), Some((false, 0, 2000, 1500, 0)));
        assert_eq!(answers[2], GroupAnswer::NotRun);
    }

    #[test]
    fn a_malformed_group_reply_is_an_error() {
        for reply in [
            vec![],
            vec!["1 2 3 4".to_owned(), "5".to_owned()],
            vec!["1 2 3".to_owned()],
            vec!["1 2 x 4".to_owned()],
            vec!["".to_owned()],
            vec!["1  2 3 4".to_owned()],
        ] {
            assert!(group_answers(&reply, [1].into_iter()).is_err(), "{reply:?}");
        }
    }

    #[test]
    fn a_check_answer_is_eight_fields() {
        let o = outcome(10, &[1, 9, 1000, 0, 0, 10, 0, 7]).ok();
        assert_eq!(o.map(|o| (o.decision.remaining, o.token)), Some((9, 7)));
        assert!(outcome(10, &[1, 9]).is_err());
    }
}
