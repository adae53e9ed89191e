//! The two entry points: [`replay`] (every line through the policies, a [`Report`]) and
//! [`scan`] (every line parsed and merged, nothing replayed: what the logs hold, and the cost
//! of reading them alone).

use std::path::PathBuf;

use crate::engine::Engine;
use crate::error::Error;
use crate::input::{MAX_STACKED, NO_TIER, ReplayOptions, ReplayPolicy};
use crate::merge::Merge;
use crate::parse::LineParser;
use crate::progress::Progress;
use crate::report::model::{Report, ReportDetails, UnparsedLine};
use crate::source::{FileSummary, UNPARSED_EXAMPLES};

/// Replays `files` (merged in time order) through `policies` with `options`.
pub fn replay(
    policies: &[ReplayPolicy],
    files: &[PathBuf],
    options: &ReplayOptions,
) -> Result<Report, Error> {
    let (mut merge, progress) = start(policies, files, options)?;

    let mut engine = Engine::new(policies, options.candidate, options.max_keys);
    let mut over_max_keys = 0u64;
    let mut over_max_keys_examples = Vec::new();
    let paths = merge.paths().to_vec();
    let outcome = merge.run(
        |file, batch, line| {
            if engine.replay(batch, line).is_err() {
                over_max_keys += 1;
                if over_max_keys_examples.len() < UNPARSED_EXAMPLES {
                    over_max_keys_examples.push(UnparsedLine {
                        file: paths[file].clone(),
                        line: line.number,
                        reason: format!(
                            "a new key past the key table's bound of {} keys",
                            options.max_keys
                        ),
                        text: String::from_utf8_lossy(batch.bytes(line.key)).into_owned(),
                    });
                }
            }
        },
        |merged| progress.update(merged),
    );
    progress.finish();
    let summaries = merge.finish();
    outcome?;
    let summaries = summaries?;

    let (first_ms, last_ms) = engine.span();
    let keys = engine.keys() as u64;
    let (lines, unparsed, mut examples) = totals(summaries);
    examples.extend(over_max_keys_examples);
    examples.truncate(UNPARSED_EXAMPLES);
    Ok(Report {
        lines,
        unparsed: unparsed + over_max_keys,
        policies: engine.finish(options.max_reject),
        max_reject: options.max_reject,
        details: ReportDetails {
            files: files.to_vec(),
            unparsed_examples: examples,
            first_ms,
            last_ms,
            keys,
        },
    })
}

/// What [`scan`] finds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanSummary {
    pub lines: u64,
    pub unparsed: u64,
    pub unparsed_examples: Vec<UnparsedLine>,
    /// The earliest and latest line time, unix ms.
    pub first_ms: Option<u64>,
    pub last_ms: Option<u64>,
}

/// Parses and merges `files` as [`replay`] does, replaying nothing.
pub fn scan(
    policies: &[ReplayPolicy],
    files: &[PathBuf],
    options: &ReplayOptions,
) -> Result<ScanSummary, Error> {
    let (mut merge, progress) = start(policies, files, options)?;
    let mut first_ms: Option<u64> = None;
    let mut last_ms: Option<u64> = None;
    let outcome = merge.run(
        |_, _, line| {
            first_ms = Some(first_ms.map_or(line.at_ms, |t| t.min(line.at_ms)));
            last_ms = Some(last_ms.map_or(line.at_ms, |t| t.max(line.at_ms)));
        },
        |merged| progress.update(merged),
    );
    progress.finish();
    let summaries = merge.finish();
    outcome?;
    let (lines, unparsed, mut unparsed_examples) = totals(summaries?);
    unparsed_examples.truncate(UNPARSED_EXAMPLES);
    Ok(ScanSummary {
        lines,
        unparsed,
        unparsed_examples,
        first_ms,
        last_ms,
    })
}

/// Checks the inputs, compiles the line parser and starts reading every file.
fn start(
    policies: &[ReplayPolicy],
    files: &[PathBuf],
    options: &ReplayOptions,
) -> Result<(Merge, Progress), Error> {
    check(policies, options)?;
    let names: Vec<&str> = policies.iter().map(|p| p.name.as_str()).collect();
    let parser = LineParser::new(options, &names)?;
    let progress = Progress::new(options.progress);
    let (merge, total) = Merge::start(files, &parser, progress.counter())?;
    progress.set_total(total);
    Ok((merge, progress))
}

/// Lines, unparsed lines and the unparsed examples of every file, in file order.
fn totals(summaries: Vec<FileSummary>) -> (u64, u64, Vec<UnparsedLine>) {
    let mut lines = 0;
    let mut unparsed = 0;
    let mut examples = Vec::new();
    for summary in summaries {
        lines += summary.lines;
        unparsed += summary.unparsed;
        examples.extend(summary.examples);
    }
    (lines, unparsed, examples)
}

/// Refuses what cannot be replayed: no policy, an invalid limit or stack, `--max-reject` out
/// of range.
fn check(policies: &[ReplayPolicy], options: &ReplayOptions) -> Result<(), Error> {
    if policies.is_empty() {
        return Err(Error::NoPolicies);
    }
    if let Some(share) = options.max_reject
        && !(0.0..=1.0).contains(&share)
    {
        return Err(Error::Option {
            flag: "--max-reject",
            message: format!("{share} is not a share between 0 and 1 (0.01 = 1 %)"),
        });
    }
    if options.max_keys == 0 {
        return Err(Error::Option {
            flag: "max_keys",
            message: "must be at least 1".to_owned(),
        });
    }
    for policy in policies {
        let limits = std::iter::once((NO_TIER, &policy.base))
            .chain(
                policy
                    .tiers
                    .iter()
                    .map(|(tier, limit)| (tier.as_str(), limit)),
            )
            .chain(
                policy
                    .candidates
                    .iter()
                    .map(|(tier, limit)| (tier.as_str(), limit)),
            );
        for (tier, limit) in limits {
            limit.validate().map_err(|source| Error::Limit {
                policy: policy.name.clone(),
                tier: tier.to_owned(),
                source,
            })?;
        }
        check_stacks(policy)?;
    }
    Ok(())
}

/// Each stack: 2 to [`MAX_STACKED`] valid limits, the first being its tier's limit, of an
/// algorithm that carries a debt on a usage policy.
fn check_stacks(policy: &ReplayPolicy) -> Result<(), Error> {
    let refuse = |tier: &str, message: String| Error::Stack {
        policy: policy.name.clone(),
        tier: tier.to_owned(),
        message,
    };
    for (tier, stack) in &policy.stacks {
        let own = if tier == NO_TIER {
            Some(&policy.base)
        } else {
            policy.tiers.get(tier)
        };
        let Some(own) = own else {
            return Err(refuse(
                tier,
                "stacked limits of a tier the policy does not have".into(),
            ));
        };
        if !(2..=MAX_STACKED).contains(&stack.len()) {
            return Err(refuse(
                tier,
                format!("{} stacked limits; 2 to {MAX_STACKED} stack", stack.len()),
            ));
        }
        if stack[0].params != *own {
            return Err(refuse(
                tier,
                "the first stacked limit is not the tier's limit".into(),
            ));
        }
        for limit in stack {
            limit.params.validate().map_err(|source| Error::Limit {
                policy: policy.name.clone(),
                tier: limit.label.clone(),
                source,
            })?;
        }
    }
    if policy.usage {
        let every = std::iter::once(&policy.base)
            .chain(policy.tiers.values())
            .chain(policy.stacks.values().flatten().map(|s| &s.params));
        if let Some(limit) = every.into_iter().find(|l| !l.algorithm.carries_debt()) {
            return Err(refuse(
                NO_TIER,
                format!(
                    "usage = true needs an algorithm that carries a debt, not {}",
                    limit.algorithm.as_str()
                ),
            ));
        }
    }
    Ok(())
}
