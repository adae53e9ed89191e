//! From a log line to a replayable [`Line`]: the format gives the time and the variables'
//! values, the `--key` and `--tier` expressions are expanded into the batch's arena, and the
//! policy and cost are chosen (the `--cost` expression first, then the CSV columns, then the
//! other flags). A line that cannot be
//! replayed answers why, and leaves the batch as it was.

use crate::batch::{ArenaRange, Batch, Line, PolicyPick};
use crate::error::Error;
use crate::formats::pattern::{NGINX_COMBINED, Pattern};
use crate::formats::{Fields, LineFormat, csv, json::JsonFormat};
use crate::input::{Format, ReplayOptions};
use crate::template::{self, Piece};

/// One piece of a compiled expression.
#[derive(Debug, Clone)]
enum ExprPiece {
    Text(Box<[u8]>),
    /// A bound variable: its binding index and name.
    Var(usize, Box<str>),
}

/// A `--key`, `--tier` or `--cost` expression bound to a format's variables.
#[derive(Debug, Clone)]
struct Expr {
    pieces: Vec<ExprPiece>,
}

impl Expr {
    fn compile(flag: &'static str, source: &str, format: &mut LineFormat) -> Result<Self, Error> {
        let wrap = |message: String| Error::Expression { flag, message };
        let pieces = template::parse(source).map_err(wrap)?;
        if !pieces.iter().any(|p| matches!(p, Piece::Var(_))) {
            return Err(wrap(format!(
                "{source:?} names no variable, so every line would get the same value"
            )));
        }
        let pieces = pieces
            .into_iter()
            .map(|piece| match piece {
                Piece::Text(text) => Ok(ExprPiece::Text(text.into_bytes().into())),
                Piece::Var(name) => format
                    .bind(&name)
                    .map(|binding| ExprPiece::Var(binding, name.into())),
            })
            .collect::<Result<_, _>>()
            .map_err(wrap)?;
        Ok(Expr { pieces })
    }

    /// Appends the expansion to `out`; `Err(name)` of the first variable that is empty.
    fn expand<'e>(
        &'e self,
        line: &[u8],
        fields: &Fields,
        out: &mut Vec<u8>,
    ) -> Result<(), &'e str> {
        for piece in &self.pieces {
            match piece {
                ExprPiece::Text(text) => out.extend_from_slice(text),
                ExprPiece::Var(binding, name) => {
                    let value = fields.get(line, *binding);
                    if value.is_empty() {
                        return Err(name);
                    }
                    out.extend_from_slice(value);
                }
            }
        }
        Ok(())
    }
}

/// Parses lines of one file into batches (each reader thread has its own clone).
#[derive(Debug, Clone)]
pub(crate) struct LineParser {
    format: LineFormat,
    key: Expr,
    tier: Option<Expr>,
    /// `--cost`, and the buffer its expansion is read from.
    cost: Option<Expr>,
    cost_text: Vec<u8>,
    /// CSV: the policy, tier and cost columns are read.
    csv_columns: bool,
    /// Policy names in replay order, to resolve a CSV `policy` value.
    policy_names: Vec<Box<[u8]>>,
    /// Where a line without a CSV `policy` value goes.
    default_pick: PolicyPick,
    fields: Fields,
}

impl LineParser {
    /// Compiles the format and the expressions of `options` for policies `policy_names`.
    pub(crate) fn new(options: &ReplayOptions, policy_names: &[&str]) -> Result<Self, Error> {
        let mut format = match &options.format {
            Format::Nginx { log_format } => LineFormat::Pattern(
                Pattern::nginx(log_format.as_deref().unwrap_or(NGINX_COMBINED))
                    .map_err(Error::LogFormat)?,
            ),
            Format::Envoy => LineFormat::Pattern(Pattern::envoy().map_err(Error::LogFormat)?),
            Format::Json { time_field } => LineFormat::Json(JsonFormat::new(time_field.as_deref())),
            Format::Csv => LineFormat::Csv(csv::CsvFormat),
        };
        let key_source = options
            .key
            .as_deref()
            .unwrap_or_else(|| options.format.default_key());
        let key = Expr::compile("--key", key_source, &mut format)?;
        let tier = options
            .tier
            .as_deref()
            .map(|source| Expr::compile("--tier", source, &mut format))
            .transpose()?;
        let cost = options
            .cost
            .as_deref()
            .map(|source| Expr::compile("--cost", source, &mut format))
            .transpose()?;
        let default_pick = match &options.policy {
            None => PolicyPick::All,
            Some(name) => {
                let index = policy_names.iter().position(|n| n == name).ok_or_else(|| {
                    Error::UnknownPolicy {
                        name: name.clone(),
                        known: policy_names.join(", "),
                    }
                })?;
                PolicyPick::One(index as u32)
            }
        };
        Ok(LineParser {
            csv_columns: matches!(format, LineFormat::Csv(_)),
            format,
            key,
            tier,
            cost,
            cost_text: Vec::new(),
            policy_names: policy_names.iter().map(|n| n.as_bytes().into()).collect(),
            default_pick,
            fields: Fields::default(),
        })
    }

    /// Whether `line`, the first of its file, is a header to skip.
    pub(crate) fn is_header(&self, line: &[u8]) -> bool {
        self.format.is_header(line)
    }

    /// Parses `line` into `batch`, or answers why it cannot be replayed (the batch unchanged).
    /// `number` is the line's 1-based number in its file.
    pub(crate) fn parse(
        &mut self,
        number: u64,
        line: &[u8],
        batch: &mut Batch,
    ) -> Result<(), String> {
        let mark = batch.arena.len();
        let result = self.parse_into(number, line, batch);
        if result.is_err() {
            batch.arena.truncate(mark);
        }
        result
    }

    fn parse_into(&mut self, number: u64, line: &[u8], batch: &mut Batch) -> Result<(), String> {
        let at_ms = self.format.parse(line, &mut self.fields)?;
        let fields = &self.fields;
        let mut policy = self.default_pick;
        let mut cost = 1;
        let mut tier_column: &[u8] = &[];
        if self.csv_columns {
            let name = fields.get(line, csv::POLICY);
            if !name.is_empty() {
                let index = self
                    .policy_names
                    .iter()
                    .position(|n| **n == *name)
                    .ok_or_else(|| format!("unknown policy {:?}", String::from_utf8_lossy(name)))?;
                policy = PolicyPick::One(index as u32);
            }
            let written = fields.get(line, csv::COST);
            // `--cost` given, the column is not read.
            if !written.is_empty() && self.cost.is_none() {
                cost = std::str::from_utf8(written)
                    .ok()
                    .and_then(|text| text.parse::<u64>().ok())
                    .filter(|&cost| cost >= 1)
                    .ok_or_else(|| {
                        format!(
                            "bad cost {:?}: a whole number of at least 1",
                            String::from_utf8_lossy(written)
                        )
                    })?;
            }
            tier_column = fields.get(line, csv::TIER);
        }
        if let Some(expr) = &self.cost {
            self.cost_text.clear();
            expr.expand(line, fields, &mut self.cost_text)
                .map_err(|name| format!("--cost variable ${name} is empty"))?;
            cost = whole_number(&self.cost_text).ok_or_else(|| {
                format!(
                    "bad --cost {:?}: a whole number of at least 0",
                    String::from_utf8_lossy(&self.cost_text)
                )
            })?;
        }

        let key_start = batch.arena.len();
        self.key
            .expand(line, fields, &mut batch.arena)
            .map_err(|name| format!("--key variable ${name} is empty"))?;
        let key = range(key_start, batch.arena.len());

        let tier_start = batch.arena.len();
        if !tier_column.is_empty() {
            batch.arena.extend_from_slice(tier_column);
        } else if let Some(tier) = &self.tier
            && tier.expand(line, fields, &mut batch.arena).is_err()
        {
            // A tier expression with an empty variable names no tier.
            batch.arena.truncate(tier_start);
        }
        let tier = range(tier_start, batch.arena.len());

        batch.lines.push(Line {
            at_ms,
            number,
            key,
            tier,
            policy,
            cost,
        });
        Ok(())
    }
}

/// `text` as a whole number: digits only (a JSON number like `12.0` or `1e3` is not one).
fn whole_number(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn range(start: usize, end: usize) -> ArenaRange {
    ArenaRange {
        start: start as u32,
        end: end as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(format: Format) -> ReplayOptions {
        ReplayOptions::new(format)
    }

    fn parsed(
        parser: &mut LineParser,
        line: &str,
    ) -> Result<(u64, String, String, PolicyPick, u64), String> {
        let mut batch = Batch::default();
        parser.parse(1, line.as_bytes(), &mut batch)?;
        let parsed = batch.lines[0];
        let text = |r| String::from_utf8_lossy(batch.bytes(r)).into_owned();
        Ok((
            parsed.at_ms,
            text(parsed.key),
            text(parsed.tier),
            parsed.policy,
            parsed.cost,
        ))
    }

    #[test]
    fn csv_columns_win_over_the_flags() {
        let mut opts = options(Format::Csv);
        opts.policy = Some("b".into());
        opts.tier = Some("t-$key".into());
        let mut parser = LineParser::new(&opts, &["a", "b"]).unwrap();
        assert_eq!(
            parsed(&mut parser, "1796551200,k1,a,pro,3").unwrap(),
            (
                1_796_551_200_000,
                "k1".into(),
                "pro".into(),
                PolicyPick::One(0),
                3
            )
        );
        assert_eq!(
            parsed(&mut parser, "1796551200,k1").unwrap(),
            (
                1_796_551_200_000,
                "k1".into(),
                "t-k1".into(),
                PolicyPick::One(1),
                1
            )
        );
        assert_eq!(
            parsed(&mut parser, "1796551200,k1,zzz").unwrap_err(),
            "unknown policy \"zzz\""
        );
        assert!(
            parsed(&mut parser, "1796551200,k1,a,,0")
                .unwrap_err()
                .contains("bad cost")
        );
        assert!(
            parsed(&mut parser, "1796551200,,a")
                .unwrap_err()
                .contains("$key is empty")
        );
    }

    #[test]
    fn expressions_are_checked_against_the_format() {
        let mut opts = options(Format::nginx_combined());
        opts.key = Some("user:$http_x_user_id".into());
        let error = LineParser::new(&opts, &["a"]).unwrap_err();
        assert!(
            matches!(error, Error::Expression { flag: "--key", .. }),
            "{error}"
        );
        opts.key = Some("constant".into());
        assert!(LineParser::new(&opts, &["a"]).is_err());
        opts.key = None;
        opts.policy = Some("nope".into());
        assert!(matches!(
            LineParser::new(&opts, &["a"]).unwrap_err(),
            Error::UnknownPolicy { .. }
        ));
    }

    #[test]
    fn the_cost_expression_wins_and_refuses_what_is_not_a_whole_number() {
        let mut opts = options(Format::Json { time_field: None });
        opts.cost = Some("$usage_total_tokens".into());
        let mut parser = LineParser::new(&opts, &["a"]).unwrap();
        let line = |usage: &str| {
            format!(r#"{{"time":1796551200,"remote_addr":"10.0.0.1","usage":{usage}}}"#)
        };
        let cost = |parser: &mut LineParser, usage: &str| {
            parsed(parser, &line(usage)).map(|(_, _, _, _, cost)| cost)
        };
        assert_eq!(cost(&mut parser, r#"{"total_tokens":812}"#), Ok(812));
        assert_eq!(cost(&mut parser, r#"{"total_tokens":0}"#), Ok(0));
        for bad in [
            r#"{"total_tokens":"many"}"#,
            r#"{"total_tokens":12.5}"#,
            r#"{"total_tokens":-3}"#,
        ] {
            assert!(
                cost(&mut parser, bad).unwrap_err().contains("bad --cost"),
                "{bad}"
            );
        }
        assert!(
            cost(&mut parser, "{}")
                .unwrap_err()
                .contains("$usage_total_tokens is empty")
        );
        // A CSV line's cost column yields to --cost.
        let mut opts = options(Format::Csv);
        opts.cost = Some("${policy}".into());
        let mut parser = LineParser::new(&opts, &["7"]).unwrap();
        assert_eq!(parsed(&mut parser, "1796551200,k,7,,3").unwrap().4, 7);
    }

    #[test]
    fn an_empty_tier_variable_is_no_tier() {
        let mut opts = options(Format::Nginx {
            log_format: Some("$remote_addr [$time_local] $http_x_plan".into()),
        });
        opts.tier = Some("$http_x_plan".into());
        let mut parser = LineParser::new(&opts, &["a"]).unwrap();
        let (_, key, tier, pick, _) =
            parsed(&mut parser, "10.0.0.1 [06/Dec/2026:10:00:00 +0000] -").unwrap();
        assert_eq!(
            (key.as_str(), tier.as_str(), pick),
            ("ip:10.0.0.1", "", PolicyPick::All)
        );
        let (_, _, tier, _, _) =
            parsed(&mut parser, "10.0.0.1 [06/Dec/2026:10:00:00 +0000] pro").unwrap();
        assert_eq!(tier, "pro");
    }
}
