//! CSV logs: `timestamp,key[,policy,tier,cost]`, the timestamp in unix seconds (fractions
//! allowed) or RFC 3339. A field may be double-quoted (a `""` inside is one `"`), so a key
//! may hold commas. A file's first line is a header, and skipped, when its first field is
//! `timestamp`.

use super::{Fields, Span};
use crate::time;

/// The columns, in order; their names are the CSV variables of `--key` / `--tier`.
pub const COLUMNS: [&str; 5] = ["timestamp", "key", "policy", "tier", "cost"];

/// Binding index of each column (the binding index is the column index).
pub(crate) const POLICY: usize = 2;
pub(crate) const TIER: usize = 3;
pub(crate) const COST: usize = 4;

/// The CSV format (it has nothing to compile; bindings are the fixed columns).
#[derive(Debug, Clone, Default)]
pub(crate) struct CsvFormat;

impl CsvFormat {
    pub(crate) fn bind(&mut self, name: &str) -> Result<usize, String> {
        COLUMNS.iter().position(|c| *c == name).ok_or_else(|| {
            format!(
                "CSV has no column ${name}; its columns are ${}",
                COLUMNS.join(" $")
            )
        })
    }

    pub(crate) fn parse(&mut self, line: &[u8], fields: &mut Fields) -> Result<u64, String> {
        let mut at = 0;
        let mut column = 0;
        loop {
            if column == COLUMNS.len() {
                return Err(format!("more than {} columns", COLUMNS.len()));
            }
            let end = if line.get(at) == Some(&b'"') {
                quoted(line, at, column, fields)?
            } else {
                let end = memchr::memchr(b',', &line[at..]).map_or(line.len(), |i| at + i);
                fields.spans[column] = Span::of_line(at, end);
                end
            };
            column += 1;
            match line.get(end) {
                None => break,
                Some(b',') => at = end + 1,
                Some(_) => return Err(format!("text after the closing quote of column {column}")),
            }
        }
        if column < 2 {
            return Err("fewer than 2 columns (timestamp,key)".to_owned());
        }
        let value = fields.get(line, 0);
        time::any_millis(value)
            .ok_or_else(|| format!("bad timestamp {:?}", String::from_utf8_lossy(value)))
    }
}

/// Reads the quoted field starting at `start` (its opening quote) into column `column`;
/// answers the index just past the closing quote.
fn quoted(line: &[u8], start: usize, column: usize, fields: &mut Fields) -> Result<usize, String> {
    let mut at = start + 1;
    let mut value: Option<Vec<u8>> = None;
    loop {
        let Some(quote) = memchr::memchr(b'"', &line[at..]).map(|i| at + i) else {
            return Err(format!("column {} has no closing quote", column + 1));
        };
        if line.get(quote + 1) == Some(&b'"') {
            // An escaped quote: the value is rewritten without the doubling.
            let buffer = value.get_or_insert_with(Vec::new);
            buffer.extend_from_slice(&line[at..=quote]);
            at = quote + 2;
            continue;
        }
        match value {
            Some(mut buffer) => {
                buffer.extend_from_slice(&line[at..quote]);
                fields.set_scratch(column, &buffer);
            }
            None => fields.spans[column] = Span::of_line(start + 1, quote),
        }
        return Ok(quote + 1);
    }
}

/// Whether `line` is a header: its first field is `timestamp` (quoted or not).
pub(crate) fn is_header(line: &[u8]) -> bool {
    let first = memchr::memchr(b',', line)
        .map_or(line, |i| &line[..i])
        .trim_ascii();
    let first = first
        .strip_prefix(b"\"")
        .and_then(|inner| inner.strip_suffix(b"\""))
        .unwrap_or(first);
    first == b"timestamp"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<(u64, Vec<String>), String> {
        let mut format = CsvFormat;
        let mut fields = Fields::default();
        fields.reset(COLUMNS.len());
        let at = format.parse(line.as_bytes(), &mut fields)?;
        let values = (0..COLUMNS.len())
            .map(|i| String::from_utf8_lossy(fields.get(line.as_bytes(), i)).into_owned())
            .collect();
        Ok((at, values))
    }

    #[test]
    fn two_to_five_columns() {
        let (at, values) = parse("1796551200.5,user:1").unwrap();
        assert_eq!(at, 1_796_551_200_500);
        assert_eq!(values, ["1796551200.5", "user:1", "", "", ""]);
        let (at, values) = parse("2026-12-06T10:00:00Z,\"a,\"\"b\"\"\",public,pro,3").unwrap();
        assert_eq!(at, 1_796_551_200_000);
        assert_eq!(values[1..], ["a,\"b\"", "public", "pro", "3"]);
    }

    #[test]
    fn bad_rows_say_why() {
        assert!(parse("1796551200").unwrap_err().contains("fewer than 2"));
        assert!(parse("1,a,b,c,d,e").unwrap_err().contains("more than 5"));
        assert!(parse("yesterday,a").unwrap_err().contains("bad timestamp"));
        assert!(parse("1,\"a").unwrap_err().contains("no closing quote"));
        assert!(
            parse("1,\"a\"x")
                .unwrap_err()
                .contains("after the closing quote")
        );
    }

    #[test]
    fn headers() {
        assert!(is_header(b"timestamp,key,policy"));
        assert!(is_header(b"\"timestamp\",\"key\""));
        assert!(!is_header(b"1796551200,timestamp"));
    }
}
