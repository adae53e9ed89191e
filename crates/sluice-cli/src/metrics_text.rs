//! Reading counters from the daemon's `/metrics` (the Prometheus text format): just enough of
//! it to sum a counter's samples whose labels match, which is what `sluice candidate show`
//! compares. Comments, other metrics and unreadable lines are skipped.

/// One sample: the metric's name, its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Every sample of `text` named `name`.
pub fn samples(text: &str, name: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| line.starts_with(name))
        .filter_map(parse_line)
        .filter(|sample| sample.name == name)
        .collect()
}

/// `name{key="value",…} value [timestamp]`, or `name value`.
fn parse_line(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(at) => line.split_at(at),
        None => return None,
    };
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(inside) => parse_labels(inside)?,
        None => (Vec::new(), rest),
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// The labels after a `{`, and what follows the closing `}`.
fn parse_labels(mut text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start_matches([',', ' ']);
        if let Some(rest) = text.strip_prefix('}') {
            return Some((labels, rest));
        }
        let (key, rest) = text.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (at, '"') => break at,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.trim().to_owned(), value));
        text = &rest[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_with_their_labels_escapes_included() {
        let text = "# HELP rate_limit_requests Checks decided\n\
                    # TYPE rate_limit_requests counter\n\
                    rate_limit_requests_total{status=\"allowed\",policy=\"public\",endpoint=\"a\\\"b\",plan_tier=\"none\"} 12\n\
                    rate_limit_requests_total{status=\"rejected\",policy=\"public\",endpoint=\"\",plan_tier=\"pro\"} 3 1700000000\n\
                    rate_limit_requests_created{status=\"allowed\"} 1.7e9\n\
                    rate_limit_keys 5\n\
                    garbage{\n";
        let found = samples(text, "rate_limit_requests_total");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].label("endpoint"), Some("a\"b"));
        assert_eq!(found[0].value, 12.0);
        assert_eq!(found[1].label("plan_tier"), Some("pro"));
        assert_eq!(found[1].value, 3.0);
        assert_eq!(samples(text, "rate_limit_keys")[0].value, 5.0);
        assert!(samples(text, "garbage").is_empty());
    }
}
