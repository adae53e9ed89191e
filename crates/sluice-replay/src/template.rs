//! Templates of `$name` / `${name}` variables and literal text: the syntax of the `--key` and
//! `--tier` expressions and of an nginx `log_format` string. Parsing is shared; what a
//! variable name means is each user's business.

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Literal text, as written.
    Text(String),
    /// A variable, by name (without the `$` and braces).
    Var(String),
}

/// Whether `byte` may appear in a bare `$name` (nginx's variable names: letters, digits, `_`).
fn name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The pieces of `source`; adjacent text is one piece. A `$` not followed by a name or a
/// `{name}` is refused, so a typo does not silently become literal text.
pub(crate) fn parse(source: &str) -> Result<Vec<Piece>, String> {
    let bytes = source.as_bytes();
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(dollar) = memchr::memchr(b'$', &bytes[at..]).map(|i| at + i) else {
            text.push_str(&source[at..]);
            break;
        };
        text.push_str(&source[at..dollar]);
        let (name, next) = if bytes.get(dollar + 1) == Some(&b'{') {
            let close = memchr::memchr(b'}', &bytes[dollar + 2..])
                .ok_or_else(|| format!("`${{` at byte {dollar} has no closing `}}`"))?;
            (&source[dollar + 2..dollar + 2 + close], dollar + 3 + close)
        } else {
            let end = bytes[dollar + 1..]
                .iter()
                .position(|&b| !name_byte(b))
                .map_or(bytes.len(), |i| dollar + 1 + i);
            (&source[dollar + 1..end], end)
        };
        if name.is_empty() {
            return Err(format!(
                "`$` at byte {dollar} is not followed by a variable name"
            ));
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Var(name.to_owned()));
        at = next;
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str) -> Piece {
        Piece::Var(name.to_owned())
    }

    fn text(t: &str) -> Piece {
        Piece::Text(t.to_owned())
    }

    #[test]
    fn variables_and_text() {
        assert_eq!(
            parse("ip:$remote_addr").unwrap(),
            vec![text("ip:"), var("remote_addr")]
        );
        assert_eq!(
            parse("${a}b$c-${d.e}").unwrap(),
            vec![var("a"), text("b"), var("c"), text("-"), var("d.e")]
        );
        assert_eq!(parse("plain").unwrap(), vec![text("plain")]);
        assert_eq!(parse("").unwrap(), vec![]);
    }

    #[test]
    fn a_dollar_without_a_name_is_refused() {
        assert!(parse("a$").unwrap_err().contains("byte 1"));
        assert!(parse("a$-b").is_err());
        assert!(parse("${}").is_err());
        assert!(parse("${open").unwrap_err().contains("closing"));
    }
}
