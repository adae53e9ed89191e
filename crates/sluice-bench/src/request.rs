//! The request bytes, built once per connection. Every key is `bench:` plus a zero-padded
//! index of fixed width, so every request has the same length and choosing a key only
//! overwrites those digits in place: no allocation, no formatting per request.

/// The key prefix every generated key starts with.
pub const KEY_PREFIX: &str = "bench:";

/// A complete `POST` request whose key digits can be rewritten.
#[derive(Debug, Clone)]
pub struct Template {
    bytes: Vec<u8>,
    digits_at: usize,
    width: usize,
}

/// Decimal digits needed to write every index below `keys`.
pub fn key_width(keys: u64) -> usize {
    let mut n = keys.saturating_sub(1);
    let mut width = 1;
    while n >= 10 {
        n /= 10;
        width += 1;
    }
    width
}

/// The key of `index` as the template writes it (for tests and reports).
pub fn key_name(index: u64, keys: u64) -> String {
    format!("{KEY_PREFIX}{index:0width$}", width = key_width(keys))
}

impl Template {
    /// A request to `path` on `host` checking `cost` under `policy` for keys `0..keys`.
    pub fn new(host: &str, path: &str, policy: &str, keys: u64, cost: u64) -> Template {
        let width = key_width(keys);
        // serde_json escapes the policy name; a `String` always serializes.
        let policy_json = serde_json::to_string(policy).unwrap_or_else(|_| "\"\"".to_owned());
        let body_start = format!("{{\"policy\":{policy_json},\"key\":\"{KEY_PREFIX}");
        let body_end = format!("\",\"cost\":{cost}}}");
        let body_len = body_start.len() + width + body_end.len();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
        );
        let mut bytes = Vec::with_capacity(head.len() + body_len);
        bytes.extend_from_slice(head.as_bytes());
        bytes.extend_from_slice(body_start.as_bytes());
        let digits_at = bytes.len();
        bytes.resize(digits_at + width, b'0');
        bytes.extend_from_slice(body_end.as_bytes());
        Template {
            bytes,
            digits_at,
            width,
        }
    }

    /// The request for key `index`, rewritten in place.
    pub fn for_key(&mut self, index: u64) -> &[u8] {
        let mut n = index;
        for slot in self.bytes[self.digits_at..self.digits_at + self.width]
            .iter_mut()
            .rev()
        {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
        }
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths() {
        assert_eq!(key_width(0), 1);
        assert_eq!(key_width(1), 1);
        assert_eq!(key_width(10), 1);
        assert_eq!(key_width(11), 2);
        assert_eq!(key_width(1_000_000), 6);
        assert_eq!(key_width(1_000_001), 7);
    }

    #[test]
    fn the_request_is_valid_http_with_the_right_length() {
        let mut t = Template::new("localhost", "/v1/check", "pub\"lic", 1000, 2);
        let raw = String::from_utf8(t.for_key(42).to_vec()).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("POST /v1/check HTTP/1.1\r\nHost: localhost\r\n"));
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["policy"], "pub\"lic");
        assert_eq!(json["key"], "bench:042");
        assert_eq!(json["cost"], 2);
        assert_eq!(key_name(42, 1000), "bench:042");
    }

    #[test]
    fn rewriting_keeps_the_length() {
        let mut t = Template::new("h", "/v1/check", "p", 1_000_000, 1);
        let len = t.for_key(0).len();
        for i in [1, 9, 10, 999_999] {
            let raw = t.for_key(i).to_vec();
            assert_eq!(raw.len(), len);
            let text = String::from_utf8(raw).unwrap();
            assert!(text.contains(&format!("\"key\":\"{}\"", key_name(i, 1_000_000))));
        }
    }
}
