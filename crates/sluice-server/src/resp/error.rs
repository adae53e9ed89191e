//! Why a command is refused before anything is decided, as the RESP error line a client reads
//! (the code first: `ERR`, `NOPROTO`), and the readers of typed arguments that name the
//! argument they refuse.

use super::reply::shown;

/// A command refused as written. `Display` is the error line, without `-` and CRLF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("ERR unknown command '{0}'")]
    Unknown(String),
    #[error("ERR unknown subcommand '{sub}' of '{command}'")]
    UnknownSubcommand { command: &'static str, sub: String },
    #[error("ERR wrong number of arguments for '{0}' command")]
    Arity(&'static str),
    #[error("ERR {what} is not an integer from {min} to {max}: '{value}'")]
    NotAnInteger {
        what: &'static str,
        value: String,
        min: i128,
        max: i128,
    },
    #[error("ERR {0} must be UTF-8")]
    NotUtf8(&'static str),
    #[error("ERR syntax error: {0}")]
    Syntax(String),
    #[error("ERR DB index is out of range (sluiced has one database, 0)")]
    DbOutOfRange,
    #[error("NOPROTO sorry, this protocol version is not supported (sluiced speaks 2 and 3)")]
    NoProto,
    #[error("ERR {0}")]
    Invalid(String),
}

/// `bytes` as text, or the error naming `what`.
pub fn text<'a>(what: &'static str, bytes: &'a [u8]) -> Result<&'a str, CommandError> {
    std::str::from_utf8(bytes).map_err(|_| CommandError::NotUtf8(what))
}

/// `bytes` as a decimal integer from `min` to `max`, or the error naming `what`.
pub fn integer<T>(what: &'static str, bytes: &[u8], min: T, max: T) -> Result<T, CommandError>
where
    T: std::str::FromStr + PartialOrd + Copy + Into<i128>,
{
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.parse::<T>().ok())
        .filter(|value| (min..=max).contains(value))
        .ok_or_else(|| CommandError::NotAnInteger {
            what,
            value: shown(bytes),
            min: min.into(),
            max: max.into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integer_out_of_range_or_not_decimal_is_named() {
        assert_eq!(integer("COST", b"12", 0u64, 100), Ok(12));
        let err = integer("COST", b"-1", 0u64, 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ERR COST is not an integer from 0 to 100: '-1'"
        );
        assert!(integer("COST", b"1.5", 0u64, 100).is_err());
        assert!(integer("COST", b"", 0u64, 100).is_err());
        assert!(integer("period", b"101", 1i64, 100).is_err());
    }
}
