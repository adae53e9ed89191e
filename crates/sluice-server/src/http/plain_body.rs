//! The body of nearly every check, read without serde: one flat JSON object of the fields
//! `policy`, `key`, `tier`, `endpoint` (strings) and `cost` (an integer), each at most once.
//! Parsing it through the generic deserializer was a sixth of a check's instructions beyond
//! hyper's (docs/src/internals/performance.md); this scanner takes a few hundred.
//!
//! It reads only what it is sure serde reads the same way: strings without escapes, control
//! characters or non-ASCII bytes, integers without a sign, fraction, exponent or leading zero
//! (and short enough not to overflow), no `null`, no other field, no repeated field. Anything
//! else, valid or not, is `None`: the caller parses it with serde, which answers it (or names
//! its error) exactly as before.

/// The fields of a plain check body, borrowed from it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainBody<'a> {
    pub policy: Option<&'a str>,
    pub key: Option<&'a str>,
    pub cost: Option<u64>,
    pub tier: Option<&'a str>,
    pub endpoint: Option<&'a str>,
}

/// `body` as a plain check body, or `None` when serde must read it.
pub(crate) fn scan(body: &[u8]) -> Option<PlainBody<'_>> {
    let mut at = Cursor { body, at: 0 };
    let mut plain = PlainBody::default();
    at.skip_ws();
    at.expect(b'{')?;
    at.skip_ws();
    if at.peek()? == b'}' {
        at.at += 1;
    } else {
        loop {
            let name = at.string()?;
            at.skip_ws();
            at.expect(b':')?;
            at.skip_ws();
            match name {
                "cost" if plain.cost.is_none() => plain.cost = Some(at.integer()?),
                "policy" => set_once(&mut plain.policy, at.string()?)?,
                "key" => set_once(&mut plain.key, at.string()?)?,
                "tier" => set_once(&mut plain.tier, at.string()?)?,
                "endpoint" => set_once(&mut plain.endpoint, at.string()?)?,
                _ => return None,
            }
            at.skip_ws();
            match at.peek()? {
                b',' => {
                    at.at += 1;
                    at.skip_ws();
                }
                b'}' => {
                    at.at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    at.skip_ws();
    (at.at == body.len()).then_some(plain)
}

fn set_once<'a>(field: &mut Option<&'a str>, value: &'a str) -> Option<()> {
    if field.is_some() {
        return None;
    }
    *field = Some(value);
    Some(())
}

struct Cursor<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.body.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// JSON's whitespace, as serde_json skips it.
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A string of printable ASCII without escapes.
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' | 0..0x20 | 0x80.. => return None,
                _ => self.at += 1,
            }
        }
        let text = std::str::from_utf8(self.body.get(start..self.at)?).ok()?;
        self.at += 1;
        Some(text)
    }

    /// An unsigned integer of at most 19 digits (below `u64::MAX`), no leading zero.
    fn integer(&mut self) -> Option<u64> {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        let digits = self.body.get(start..self.at)?;
        if digits.is_empty() || digits.len() > 19 || (digits.len() > 1 && digits[0] == b'0') {
            return None;
        }
        // A fraction or an exponent makes it no integer serde reads as one.
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(
            digits
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_plain_bodies() {
        assert_eq!(
            scan(br#"{"policy":"bench","key":"u:1","cost":1}"#),
            Some(PlainBody {
                policy: Some("bench"),
                key: Some("u:1"),
                cost: Some(1),
                ..PlainBody::default()
            })
        );
        assert_eq!(
            scan(b" {\n \"tier\" : \"pro\" ,\t\"endpoint\":\"/a\", \"key\":\"k\",\"policy\":\"p\",\"cost\":0 }\r\n"),
            Some(PlainBody {
                policy: Some("p"),
                key: Some("k"),
                cost: Some(0),
                tier: Some("pro"),
                endpoint: Some("/a"),
            })
        );
        assert_eq!(scan(b"{}"), Some(PlainBody::default()));
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        for body in [
            &br#"{"policy":"p","key":"a\"b"}"#[..],
            br#"{"policy":"p","key":"caf\u00e9"}"#,
            "{\"policy\":\"p\",\"key\":\"café\"}".as_bytes(),
            br#"{"policy":"p","policy":"q","key":"k"}"#,
            br#"{"policy":"p","key":"k","cost":1,"cost":2}"#,
            br#"{"policy":"p","key":"k","cost":01}"#,
            br#"{"policy":"p","key":"k","cost":1.5}"#,
            br#"{"policy":"p","key":"k","cost":1e3}"#,
            br#"{"policy":"p","key":"k","cost":-1}"#,
            br#"{"policy":"p","key":"k","cost":99999999999999999999}"#,
            br#"{"policy":"p","key":"k","tier":null}"#,
            br#"{"policy":"p","key":"k","checks":[]}"#,
            br#"{"policy":"p","key":"k","other":1}"#,
            br#"{"policy":"p","key":"k"} x"#,
            br#"{"policy":"p","key":"k",}"#,
            br#"{"policy":"p" "key":"k"}"#,
            br#"{"policy":"p","key":"k""#,
            br#"["policy"]"#,
            b"{\"policy\":\"p\x01\",\"key\":\"k\"}",
            b"",
        ] {
            assert_eq!(scan(body), None, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn agrees_with_serde_on_what_it_reads() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Serde<'a> {
            #[serde(borrow)]
            policy: Option<&'a str>,
            #[serde(borrow)]
            key: Option<&'a str>,
            cost: Option<u64>,
            #[serde(borrow)]
            tier: Option<&'a str>,
            #[serde(borrow)]
            endpoint: Option<&'a str>,
        }
        for body in [
            &br#"{"policy":"bench","key":"u:1","cost":1}"#[..],
            br#"{"cost":9999999999999999999,"key":"~!@#$%^&*()_+{}[]|:;'<>,.?/ ","policy":"p"}"#,
            b" { } ",
        ] {
            let plain = scan(body).unwrap();
            let serde: Serde<'_> = serde_json::from_slice(body).unwrap();
            assert_eq!(
                (
                    plain.policy,
                    plain.key,
                    plain.cost,
                    plain.tier,
                    plain.endpoint
                ),
                (
                    serde.policy,
                    serde.key,
                    serde.cost,
                    serde.tier,
                    serde.endpoint
                )
            );
        }
    }
}
