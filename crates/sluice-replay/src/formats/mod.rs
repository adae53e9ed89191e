//! The access-log formats a replay reads. Each turns a line into its time and the values of
//! the variables bound beforehand (those the `--key` and `--tier` expressions and the CSV
//! columns name), as ranges of the line or of a scratch buffer, so a line costs no allocation
//! for the text formats.
//!
//! - [`pattern`] reads nginx `log_format` strings (and `combined`) and Envoy's default text
//!   format, both a fixed sequence of variables between literal separators.
//! - [`json`] reads one JSON object per line.
//! - [`csv`] reads `timestamp,key[,policy,tier,cost]`.

pub(crate) mod csv;
pub(crate) mod json;
pub(crate) mod pattern;

/// Where a bound variable's value is: a range of the line, or of [`Fields::scratch`] (for a
/// value the parser had to rewrite, such as a JSON string with escapes).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Span {
    start: u32,
    end: u32,
    scratch: bool,
}

impl Span {
    pub(crate) fn of_line(start: usize, end: usize) -> Self {
        Span {
            start: start as u32,
            end: end as u32,
            scratch: false,
        }
    }

    pub(crate) const EMPTY: Span = Span {
        start: 0,
        end: 0,
        scratch: false,
    };
}

/// The values of one line's bound variables, by binding index.
#[derive(Debug, Default, Clone)]
pub(crate) struct Fields {
    pub scratch: Vec<u8>,
    pub spans: Vec<Span>,
}

impl Fields {
    /// The value of bound variable `index` in `line` (empty when absent).
    pub(crate) fn get<'a>(&'a self, line: &'a [u8], index: usize) -> &'a [u8] {
        let span = self.spans.get(index).copied().unwrap_or(Span::EMPTY);
        let source = if span.scratch { &self.scratch } else { line };
        &source[span.start as usize..span.end as usize]
    }

    /// Copies `value` into the scratch buffer as the value of bound variable `index`.
    pub(crate) fn set_scratch(&mut self, index: usize, value: &[u8]) {
        let start = self.scratch.len();
        self.scratch.extend_from_slice(value);
        self.spans[index] = Span {
            start: start as u32,
            end: self.scratch.len() as u32,
            scratch: true,
        };
    }

    /// Every value empty, the scratch buffer cleared, for the next line.
    pub(crate) fn reset(&mut self, bound: usize) {
        self.scratch.clear();
        self.spans.clear();
        self.spans.resize(bound, Span::EMPTY);
    }
}

/// One of the formats, compiled.
#[derive(Debug, Clone)]
pub(crate) enum LineFormat {
    Pattern(pattern::Pattern),
    Json(json::JsonFormat),
    Csv(csv::CsvFormat),
}

impl LineFormat {
    /// The binding index of variable `name`, or why the format has no such variable.
    pub(crate) fn bind(&mut self, name: &str) -> Result<usize, String> {
        match self {
            LineFormat::Pattern(format) => format.bind(name),
            LineFormat::Json(format) => Ok(format.bind(name)),
            LineFormat::Csv(format) => format.bind(name),
        }
    }

    /// Number of bound variables.
    pub(crate) fn bound(&self) -> usize {
        match self {
            LineFormat::Pattern(format) => format.bound(),
            LineFormat::Json(format) => format.bound(),
            LineFormat::Csv(_) => csv::COLUMNS.len(),
        }
    }

    /// The line's time in unix ms, its bound values in `fields`; or why it cannot be read.
    pub(crate) fn parse(&mut self, line: &[u8], fields: &mut Fields) -> Result<u64, String> {
        fields.reset(self.bound());
        match self {
            LineFormat::Pattern(format) => format.parse(line, fields),
            LineFormat::Json(format) => format.parse(line, fields),
            LineFormat::Csv(format) => format.parse(line, fields),
        }
    }

    /// Whether `line`, the first of its file, is a header to skip (CSV only).
    pub(crate) fn is_header(&self, line: &[u8]) -> bool {
        matches!(self, LineFormat::Csv(_)) && csv::is_header(line)
    }
}
