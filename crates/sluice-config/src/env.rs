//! `SLUICE_<SECTION>__<KEY>` environment variables as a figment provider that knows the
//! policies of the file below it. Env var names are upper case and, in a shell, only letters,
//! digits and `_`, while policy and tier names are case-sensitive and may hold `.` and `-`
//! (`Public`, `api.v2`, `search-v1`): figment's own `Env` would lower-case the name and read a
//! `.` as one more level, so such a policy could never be reached. Here the segment after
//! `POLICIES` (and after `TIERS`) names the file's policy (tier) it matches: exactly, else
//! ignoring case with `_` standing for `.` or `-` (`SLUICE_POLICIES__API_V2__LIMIT` reaches
//! `api.v2`); a segment matching two names is an error naming both; one matching none is a new
//! policy (tier) of that lower-case name, as before. Every other segment is lower-cased.

use figment::providers::Env;
use figment::value::{Dict, Map, Value};
use figment::{Error, Metadata, Profile, Provider};

/// The env vars of `env` (split at `__`) laid over the file's policies and tiers.
pub struct EnvOverlay {
    env: Env,
    /// The policies of the layers below, each with its tiers.
    policies: Vec<(String, Vec<String>)>,
}

impl std::fmt::Debug for EnvOverlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvOverlay")
            .field("policies", &self.policies)
            .finish_non_exhaustive()
    }
}

impl EnvOverlay {
    /// `env` must keep the variables' case and leave `__` unsplit (as
    /// [`env_provider`](super::env_provider) does); `policies` are the names it may reach.
    pub fn new(env: Env, policies: Vec<(String, Vec<String>)>) -> Self {
        EnvOverlay { env, policies }
    }

    /// The policies and tiers of `value`, the merged layers' `policies` table.
    pub fn names_of(value: Option<&Value>) -> Vec<(String, Vec<String>)> {
        let Some(policies) = value.and_then(Value::as_dict) else {
            return Vec::new();
        };
        policies
            .iter()
            .map(|(name, policy)| {
                let tiers = policy
                    .find_ref("tiers")
                    .and_then(Value::as_dict)
                    .map(|tiers| tiers.keys().cloned().collect())
                    .unwrap_or_default();
                (name.clone(), tiers)
            })
            .collect()
    }

    /// (field, variable) of every variable: `policies.api.v2.limit` set by
    /// `SLUICE_POLICIES__API_V2__LIMIT`. A variable whose path cannot be resolved is left out
    /// ([`Provider::data`] reports it).
    pub fn fields(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .filter_map(|(key, _)| {
                let var = format!("SLUICE_{}", key.as_str().to_ascii_uppercase());
                let path = self.path(&var, key.as_str()).ok()?;
                Some((path.join("."), var))
            })
            .collect()
    }

    /// The key path of the variable `key` (prefix removed): its segments, the policy and tier
    /// resolved against the known names.
    fn path(&self, var: &str, key: &str) -> Result<Vec<String>, String> {
        let mut segments: Vec<String> = key.split("__").map(str::to_ascii_lowercase).collect();
        let raw: Vec<&str> = key.split("__").collect();
        if segments.first().map(String::as_str) != Some("policies") || raw.len() < 2 {
            return Ok(segments);
        }
        let names: Vec<&str> = self.policies.iter().map(|(n, _)| n.as_str()).collect();
        let policy = resolve(var, raw[1], &names)?;
        segments[1] = policy.clone();
        if raw.len() >= 4 && segments[2] == "tiers" {
            let tiers: Vec<&str> = self
                .policies
                .iter()
                .find(|(n, _)| *n == policy)
                .map(|(_, tiers)| tiers.iter().map(String::as_str).collect())
                .unwrap_or_default();
            segments[3] = resolve(var, raw[3], &tiers)?;
        }
        Ok(segments)
    }
}

/// `written` folded for matching: lower case, `.` and `-` as `_`.
fn fold(written: &str) -> String {
    written
        .chars()
        .map(|c| match c {
            '.' | '-' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The name among `names` that the segment `written` of `var` means.
fn resolve(var: &str, written: &str, names: &[&str]) -> Result<String, String> {
    if let Some(exact) = names.iter().find(|n| **n == written) {
        return Ok((*exact).to_owned());
    }
    let matching: Vec<&&str> = names.iter().filter(|n| fold(n) == fold(written)).collect();
    match matching.as_slice() {
        [] => Ok(written.to_ascii_lowercase()),
        [one] => Ok((**one).to_owned()),
        several => Err(format!(
            "env {var}: {written:?} matches {} names: {}; write the one meant exactly",
            several.len(),
            several
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Puts `value` at `path` in `dict`, making the tables on the way.
fn insert(dict: &mut Dict, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = dict;
    for segment in parents {
        let entry = here
            .entry(segment.clone())
            .or_insert_with(|| Value::from(Dict::new()));
        if entry.as_dict().is_none() {
            *entry = Value::from(Dict::new());
        }
        here = match entry {
            Value::Dict(_, inner) => inner,
            _ => return,
        };
    }
    here.insert(last.clone(), value);
}

impl Provider for EnvOverlay {
    fn metadata(&self) -> Metadata {
        // `environment` in the name: errors name the variable that set a field.
        Metadata::named("environment variable(s)")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let mut dict = Dict::new();
        for (key, value) in self.env.iter() {
            let var = format!("SLUICE_{}", key.as_str().to_ascii_uppercase());
            let path = self.path(&var, key.as_str()).map_err(Error::from)?;
            let value: Value = value
                .parse()
                .map_err(|_| Error::from(format!("env {var}: unreadable value")))?;
            insert(&mut dict, &path, value);
        }
        Ok(Profile::Default.collect(dict))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_reaches_its_name_exactly_or_folded_and_refuses_two() {
        let names = ["Public", "api.v2", "search-v1", "a.b", "a-b"];
        let r = |w: &str| resolve("SLUICE_X", w, &names);
        assert_eq!(r("Public").unwrap(), "Public");
        assert_eq!(r("PUBLIC").unwrap(), "Public");
        assert_eq!(r("API_V2").unwrap(), "api.v2");
        assert_eq!(r("api.v2").unwrap(), "api.v2");
        assert_eq!(r("SEARCH_V1").unwrap(), "search-v1");
        assert_eq!(r("NEW").unwrap(), "new");
        assert_eq!(r("a.b").unwrap(), "a.b");
        let err = r("A_B").unwrap_err();
        assert!(err.contains("\"a.b\"") && err.contains("\"a-b\""), "{err}");
    }
}
