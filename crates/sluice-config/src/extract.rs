//! Every unknown field and wrong type of a config in one run.
//!
//! serde stops at the first problem, so a misspelt `listen.htp` would hide a wrong-typed
//! `policies.a.limit` below it and the operator would fix a file one round trip per mistake.
//! Here the merged tree is deserialized, and each field serde refuses is recorded and taken
//! out of the tree (every key of the schema has a default), until the rest deserializes. The
//! compile step then sees the remaining values and reports what is wrong with them.

use figment::Figment;
use figment::error::Kind;
use figment::value::Value;

use super::error::FieldError;
use super::schema::Config;

/// More problems than any real file has; a bound so a tree that keeps failing at the same
/// place cannot loop.
const MAX_PROBLEMS: usize = 100;

/// The config with every refused field taken out, and what was wrong with each.
pub(super) struct Extracted {
    pub config: Config,
    pub problems: Vec<FieldError>,
    /// The fields taken out of the tree (a list whole when one of its items was refused).
    removed: Vec<String>,
}

impl Extracted {
    /// Whether `field` was refused here (the compile step then sees it unset, and must not
    /// report it a second time as missing).
    pub fn refused(&self, field: &str) -> bool {
        self.removed.iter().any(|removed| {
            field == removed
                || field
                    .strip_prefix(removed.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

/// Deserializes the merged `figment`, collecting every refused field. `Err` when the sources
/// themselves cannot be read (a TOML syntax error, an unreadable file).
pub(super) fn extract(figment: &Figment) -> Result<Extracted, Box<figment::Error>> {
    let mut tree: Value = figment.extract().map_err(Box::new)?;
    let mut problems = Vec::new();
    let mut removed = Vec::new();
    loop {
        let err = match tree.deserialize::<Config>() {
            Ok(config) => {
                return Ok(Extracted {
                    config,
                    problems,
                    removed,
                });
            }
            Err(err) => err,
        };
        let path = err.path.clone();
        problems.push(FieldError::new(field_of(&path), describe(&err.kind)));
        // A problem that cannot be taken out (at the root, or a path not in the tree) would
        // come back on every round: report what was found so far.
        let taken = (problems.len() < MAX_PROBLEMS && !path.is_empty())
            .then(|| remove(&mut tree, &path))
            .flatten();
        match taken {
            Some(depth) => removed.push(field_of(&path[..depth])),
            None => return Err(Box::new(err)),
        }
    }
}

/// What is wrong, in words an operator reads: a near name for a misspelt field, quotes instead
/// of serde's backticks.
fn describe(kind: &Kind) -> String {
    match kind {
        Kind::UnknownField(found, expected) => match nearest(found, expected) {
            Some(near) => format!("unknown field; did you mean \"{near}\"?"),
            None if expected.is_empty() => "unknown field".to_owned(),
            None => format!(
                "unknown field; expected one of {}",
                expected
                    .iter()
                    .map(|name| format!("\"{name}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        Kind::UnknownVariant(found, expected) => format!(
            "unknown value \"{found}\"; expected one of {}",
            expected.join(", ")
        ),
        Kind::InvalidType(found, expected) => {
            format!("wrong type: found {found}, expected {expected}").replace('`', "\"")
        }
        other => other.to_string().replace('`', "\""),
    }
}

/// The expected name closest to `found`, if it is close enough to be a typo.
fn nearest<'a>(found: &str, expected: &[&'a str]) -> Option<&'a str> {
    expected
        .iter()
        .map(|name| (strsim::jaro_winkler(found, name), *name))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

/// A path as the compile step names fields: `backend.nodes[1]`, `policies.a.limit`.
fn field_of(path: &[String]) -> String {
    let mut field = String::new();
    for segment in path {
        if segment.parse::<usize>().is_ok() && !field.is_empty() {
            field.push('[');
            field.push_str(segment);
            field.push(']');
        } else {
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(segment);
        }
    }
    field
}

/// Takes the value at `path` out of `tree`. Returns how many segments of `path` name what
/// was taken out (an item of a list cannot be unset: the whole list goes), `None` when the
/// path is not in the tree.
fn remove(tree: &mut Value, path: &[String]) -> Option<usize> {
    let mut node = tree;
    for (depth, segment) in path.iter().enumerate() {
        let last = depth + 1 == path.len();
        node = match node {
            Value::Dict(_, dict) if last => return dict.remove(segment).map(|_| path.len()),
            Value::Dict(_, dict) => dict.get_mut(segment)?,
            Value::Array(_, items) => {
                items.clear();
                return Some(depth);
            }
            _ => return None,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use figment::providers::{Format, Serialized, Toml};

    use super::*;

    fn extract_text(toml: &str) -> Extracted {
        let figment =
            Figment::from(Serialized::defaults(Config::default())).merge(Toml::string(toml));
        match extract(&figment) {
            Ok(extracted) => extracted,
            Err(err) => panic!("{err}"),
        }
    }

    #[test]
    fn every_unknown_field_and_wrong_type_is_found_in_one_run() {
        let got = extract_text(
            r#"
[listen]
htp = "127.0.0.1:1"
[policies.a]
limit = "many"
window = 10
[policies.b]
algorithm = "gcra"
brust = 3
"#,
        );
        let fields: Vec<&str> = got.problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "listen.htp",
                "policies.a.limit",
                "policies.a.window",
                "policies.b.brust"
            ]
        );
        assert_eq!(
            got.problems[3].message,
            "unknown field; did you mean \"burst\"?"
        );
        assert!(!got.problems.iter().any(|p| p.message.contains('`')));
        assert!(got.refused("policies.a.limit"));
        assert!(!got.refused("policies.a"));
        assert_eq!(got.config.policies["b"].algorithm.as_deref(), Some("gcra"));
        assert_eq!(got.config.policies["a"].limit, None);
    }

    #[test]
    fn a_name_far_from_every_field_lists_them() {
        let got = extract_text("[admin]\nzzzzzz = 1\n");
        assert_eq!(got.problems.len(), 1);
        assert_eq!(
            got.problems[0].message,
            "unknown field; expected one of \"token\""
        );
    }

    #[test]
    fn a_wrong_type_inside_a_list_drops_the_list() {
        let got = extract_text("[backend]\nnodes = [\"redis://a:1\", 7]\n");
        assert_eq!(got.problems.len(), 1);
        assert_eq!(got.problems[0].field, "backend.nodes[1]");
        assert!(got.config.backend.nodes.is_empty());
        assert!(got.refused("backend.nodes"));
    }
}
