//! `[[rls.descriptors]]` compiled: which (domain, entry keys) an Envoy descriptor must have to
//! be limited, by which policy, and the key template that turns its entry values into a sluice
//! key. Compiled once per config load (and validated with it), so a request only looks up.

use std::collections::{BTreeMap, HashMap};

use crate::error::FieldError;
use crate::schema::{PolicyConfig, RlsConfig};

/// Every rule, by domain.
#[derive(Debug, Default)]
pub struct Rules {
    by_domain: HashMap<Box<str>, Vec<Rule>>,
    /// The domains of `rls.envoy_config`, loaded with the config (and so swapped with it).
    pub envoy: std::sync::Arc<crate::envoy_yaml::EnvoyDomains>,
}

/// One `[[rls.descriptors]]` entry.
#[derive(Debug)]
pub struct Rule {
    /// The descriptor's entry keys, in order.
    keys: Vec<Box<str>>,
    pub policy: Box<str>,
    template: Vec<Part>,
}

/// A piece of a key template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(Box<str>),
    /// The value of the entry at this index of `keys`.
    Entry(usize),
}

impl Rules {
    /// Compiles `config` against the policies it may name; every problem is reported, each
    /// naming its field (`rls.descriptors[2].key`).
    pub fn compile(
        config: &RlsConfig,
        policies: &BTreeMap<String, PolicyConfig>,
    ) -> Result<Rules, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut rules = Rules {
            envoy: config.envoy.clone(),
            ..Rules::default()
        };
        for (i, d) in config.descriptors.iter().enumerate() {
            let field = |name: &str| format!("rls.descriptors[{i}].{name}");
            let before = errors.len();
            if d.domain.is_empty() {
                errors.push(FieldError::new(field("domain"), "required, e.g. \"edge\""));
            }
            if d.keys.is_empty() {
                errors.push(FieldError::new(
                    field("keys"),
                    "required: the descriptor's entry keys in order, e.g. [\"remote_address\"]",
                ));
            }
            for (k, key) in d.keys.iter().enumerate() {
                if key.is_empty() {
                    errors.push(FieldError::new(
                        format!("{}[{k}]", field("keys")),
                        "an entry key cannot be empty",
                    ));
                } else if d.keys[..k].contains(key) {
                    errors.push(FieldError::new(
                        format!("{}[{k}]", field("keys")),
                        format!("{key:?} is listed twice"),
                    ));
                }
            }
            if d.policy.is_empty() {
                errors.push(FieldError::new(field("policy"), "required"));
            } else if !policies.contains_key(&d.policy) {
                errors.push(FieldError::new(
                    field("policy"),
                    format!("unknown policy {:?}", d.policy),
                ));
            }
            let template = match parse_template(&d.key, &d.keys) {
                Ok(template) => template,
                Err(why) => {
                    errors.push(FieldError::new(field("key"), why));
                    Vec::new()
                }
            };
            if errors.len() > before {
                continue;
            }
            let same = rules.by_domain.get(d.domain.as_str()).is_some_and(|list| {
                list.iter().any(|r| {
                    r.keys
                        .iter()
                        .map(|k| &**k)
                        .eq(d.keys.iter().map(String::as_str))
                })
            });
            if same {
                errors.push(FieldError::new(
                    field("keys"),
                    format!(
                        "domain {:?} already has a descriptor with keys {:?}; this one would never match",
                        d.domain, d.keys
                    ),
                ));
                continue;
            }
            // One Envoy request names one domain and its matched descriptors are decided as one
            // all-or-nothing batch, which cannot span scopes: refuse here rather than answer
            // every such request with an error.
            let scope_of = |policy: &str| policies.get(policy).map(|p| p.scope.as_str());
            let other_scope = rules.by_domain.get(d.domain.as_str()).and_then(|list| {
                list.iter()
                    .find(|r| scope_of(&r.policy) != scope_of(&d.policy))
            });
            if let Some(other) = other_scope {
                errors.push(FieldError::new(
                    field("policy"),
                    format!(
                        "policy {:?} is scope {:?} but domain {:?} already maps to {:?} of scope {:?}; \
                         one request's descriptors are decided as one batch, which cannot mix scopes",
                        d.policy,
                        scope_of(&d.policy).unwrap_or_default(),
                        d.domain,
                        &*other.policy,
                        scope_of(&other.policy).unwrap_or_default(),
                    ),
                ));
                continue;
            }
            rules
                .by_domain
                .entry(d.domain.as_str().into())
                .or_default()
                .push(Rule {
                    keys: d.keys.iter().map(|k| k.as_str().into()).collect(),
                    policy: d.policy.as_str().into(),
                    template,
                });
        }
        if errors.is_empty() {
            Ok(rules)
        } else {
            Err(errors)
        }
    }

    /// The rule for a descriptor of `domain` with these `(key, value)` entries: the one whose
    /// keys are exactly the entry keys, in order. `None`: the descriptor is not limited.
    pub fn find<'a, 'e>(
        &'a self,
        domain: &str,
        entries: &'e [(&'e str, &'e str)],
    ) -> Option<&'a Rule> {
        self.by_domain.get(domain)?.iter().find(|rule| {
            rule.keys.len() == entries.len()
                && rule
                    .keys
                    .iter()
                    .zip(entries)
                    .all(|(key, (entry, _))| **key == **entry)
        })
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.by_domain.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Rule {
    /// The sluice key of a descriptor this rule matched (`entries` in the rule's key order).
    pub fn key(&self, entries: &[(&str, &str)]) -> String {
        let mut key = String::new();
        for part in &self.template {
            match part {
                Part::Literal(text) => key.push_str(text),
                Part::Entry(i) => {
                    if let Some((_, value)) = entries.get(*i) {
                        key.push_str(value);
                    }
                }
            }
        }
        key
    }
}

/// `"ip:{remote_address}"` → literal `ip:` then the value of entry `remote_address`.
/// Braces only delimit placeholders, and each placeholder must name one of `keys`.
fn parse_template(template: &str, keys: &[String]) -> Result<Vec<Part>, String> {
    if template.is_empty() {
        return Err("required: a key template such as \"ip:{remote_address}\"".to_owned());
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find(['{', '}']) {
            None => {
                parts.push(Part::Literal(rest.into()));
                break;
            }
            Some(at) => {
                if at > 0 {
                    parts.push(Part::Literal(rest[..at].into()));
                }
                if rest[at..].starts_with('}') {
                    return Err(format!(
                        "{template:?}: '}}' without an opening '{{' at byte {}",
                        template.len() - rest.len() + at
                    ));
                }
                let inner = &rest[at + 1..];
                let Some(end) = inner
                    .find(['{', '}'])
                    .filter(|&e| inner[e..].starts_with('}'))
                else {
                    return Err(format!(
                        "{template:?}: a '{{' is not closed by '}}' before the next brace"
                    ));
                };
                let name = &inner[..end];
                let Some(index) = keys.iter().position(|k| k == name) else {
                    return Err(format!(
                        "{template:?}: placeholder {{{name}}} is not one of keys {keys:?}"
                    ));
                };
                parts.push(Part::Entry(index));
                rest = &inner[end + 1..];
            }
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RlsDescriptorConfig;

    fn policies() -> BTreeMap<String, PolicyConfig> {
        BTreeMap::from([("public".to_owned(), PolicyConfig::default())])
    }

    fn rule(domain: &str, keys: &[&str], policy: &str, key: &str) -> RlsDescriptorConfig {
        RlsDescriptorConfig {
            domain: domain.to_owned(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            policy: policy.to_owned(),
            key: key.to_owned(),
        }
    }

    #[test]
    fn a_descriptor_matches_its_exact_keys_and_fills_the_template() {
        let config = RlsConfig {
            descriptors: vec![
                rule("edge", &["remote_address"], "public", "ip:{remote_address}"),
                rule(
                    "edge",
                    &["user", "path"],
                    "public",
                    "u:{user}:{path}:{user}",
                ),
            ],
            ..RlsConfig::default()
        };
        let rules = Rules::compile(&config, &policies()).unwrap();
        assert_eq!(rules.len(), 2);
        let ip = [("remote_address", "10.0.0.1")];
        let found = rules.find("edge", &ip).unwrap();
        assert_eq!(
            (&*found.policy, found.key(&ip)),
            ("public", "ip:10.0.0.1".into())
        );
        let both = [("user", "ann"), ("path", "/a")];
        assert_eq!(
            rules.find("edge", &both).unwrap().key(&both),
            "u:ann:/a:ann"
        );
        // Another domain, another order, a prefix or an extra entry: not limited.
        assert!(rules.find("other", &ip).is_none());
        assert!(
            rules
                .find("edge", &[("path", "/a"), ("user", "ann")])
                .is_none()
        );
        assert!(rules.find("edge", &[("user", "ann")]).is_none());
        assert!(
            rules
                .find("edge", &[("remote_address", "1"), ("x", "y")])
                .is_none()
        );
    }

    #[test]
    fn every_bad_descriptor_is_named() {
        let config = RlsConfig {
            descriptors: vec![
                rule("", &[], "nope", ""),
                rule("edge", &["a", "a", ""], "public", "x:{b}"),
                rule("edge", &["a"], "public", "x:{a"),
                rule("edge", &["a"], "public", "x:a}"),
                rule("edge", &["a"], "public", "{a}"),
                rule("edge", &["a"], "public", "again:{a}"),
            ],
            ..RlsConfig::default()
        };
        let errors = Rules::compile(&config, &policies()).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "rls.descriptors[0].domain",
                "rls.descriptors[0].keys",
                "rls.descriptors[0].policy",
                "rls.descriptors[0].key",
                "rls.descriptors[1].keys[1]",
                "rls.descriptors[1].keys[2]",
                "rls.descriptors[1].key",
                "rls.descriptors[2].key",
                "rls.descriptors[3].key",
                "rls.descriptors[5].keys",
            ],
            "{errors:?}"
        );
        assert!(errors[2].message.contains("unknown policy \"nope\""));
        assert!(errors[6].message.contains("{b} is not one of keys"));
    }

    #[test]
    fn one_domain_cannot_map_to_policies_of_different_scopes() {
        let mut policies = policies();
        let global = PolicyConfig {
            scope: "global".to_owned(),
            ..PolicyConfig::default()
        };
        policies.insert("shared".to_owned(), global);
        let config = RlsConfig {
            descriptors: vec![
                rule("edge", &["a"], "public", "a:{a}"),
                rule("edge", &["b"], "shared", "b:{b}"),
                // Another domain may use another scope.
                rule("api", &["b"], "shared", "b:{b}"),
            ],
            ..RlsConfig::default()
        };
        let errors = Rules::compile(&config, &policies).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "rls.descriptors[1].policy");
        assert!(
            errors[0].message.contains("cannot mix scopes"),
            "{errors:?}"
        );
    }
}
