//! The config file's JSON Schema against what it describes. `sluiced --print-config-schema`
//! prints the schema derived from the raw config types; the copy editors use
//! (`docs/sluice.schema.json`, named by `#:schema` lines and `.taplo.toml`) must be that
//! schema; the key table of the configuration reference is generated from it; every config
//! file shipped under `examples/`, `packaging/` and `deploy/` validates against it (Python's
//! `jsonschema`, draft 2020-12) and a misspelt key does not; and `examples/sluice.toml`, the
//! commented reference, names every key the schema has. `UPDATE_DOCS=1` rewrites the copy and
//! the table after a deliberate change.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

use crate::assets;
use crate::docs;

/// The copy of the schema editors and validators read.
const SCHEMA_COPY: &str = "docs/sluice.schema.json";

/// The page holding the generated key table, and the markers around it.
const REFERENCE: &str = "docs/src/reference/config.md";
const BEGIN: &str = "<!-- BEGIN generated from the schema: UPDATE_DOCS=1 cargo test -p sluice-tests --test lints config_schema -->";
const END: &str = "<!-- END generated -->";

/// Every sluice config file shipped with the repository.
const SHIPPED: [&str; 5] = [
    "examples/sluice.toml",
    "examples/envoy/sluice.toml",
    "packaging/sluice.toml",
    "deploy/kubernetes/base/sluice.toml",
    "deploy/kubernetes/overlays/redis/sluice.toml",
];

/// Keys of the schema the example rightly leaves out, and why.
const NOT_IN_EXAMPLE: [(&str, &str); 1] = [(
    "region.global.name",
    "the type of a peer serves the global backend too, and the compile refuses a name there",
)];

const PYTHON: &str = "python3 with the `jsonschema` module is a requirement of the schema tests \
    (pip install jsonschema; scripts/test installs it); they never skip";

fn schema() -> Value {
    sluice_config::json_schema()
}

fn pretty(value: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(value).unwrap())
}

fn updating() -> bool {
    std::env::var_os("UPDATE_DOCS").is_some()
}

/// The schema a `$ref` (`#/$defs/Name`) names, or `node` itself.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.trim_start_matches("#/$defs/");
            &root["$defs"][name]
        }
        None => node,
    }
}

/// `node` without the `null` an `Option` adds (`anyOf: [X, {type: null}]`, `type: [T, null]`).
fn non_null<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let any = node.get("anyOf").and_then(Value::as_array);
    match any.and_then(|any| {
        any.iter()
            .find(|s| s.get("type") != Some(&Value::from("null")))
    }) {
        Some(one) => resolve(root, one),
        None => resolve(root, node),
    }
}

/// The placeholder a map's keys get in a key path: a policy's name, a tier's.
fn placeholder(map: &str) -> &'static str {
    match map {
        "policies" => "NAME",
        "tiers" => "TIER",
        _ => "KEY",
    }
}

/// A key of the schema: its dotted path (`policies.NAME.tiers.TIER.limit`,
/// `rls.descriptors[].domain`) and its schema.
struct Key<'a> {
    path: String,
    schema: &'a Value,
    parent_doc: Option<&'a Value>,
}

/// Every leaf key of the object schema `node`, depth first, in the schema's (alphabetical) order.
fn keys<'a>(root: &'a Value, node: &'a Value, prefix: &str, out: &mut Vec<Key<'a>>) {
    let Some(properties) = node.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let inner = non_null(root, property);
        if inner.get("properties").is_some() {
            keys(root, inner, &path, out);
        } else if let Some(values) = inner.get("additionalProperties").filter(|v| v.is_object()) {
            let values = non_null(root, values);
            keys(root, values, &format!("{path}.{}", placeholder(name)), out);
        } else if let Some(items) = inner.get("items").map(|i| non_null(root, i))
            && items.get("properties").is_some()
        {
            keys(root, items, &format!("{path}[]"), out);
        } else {
            out.push(Key {
                path,
                schema: property,
                parent_doc: Some(inner),
            });
        }
    }
}

/// The key paths of the schema.
fn schema_keys(root: &Value) -> Vec<Key<'_>> {
    let mut out = Vec::new();
    keys(root, root, "", &mut out);
    out
}

/// The type column: the enum's values, "duration", or the JSON type.
fn type_of(root: &Value, key: &Key<'_>) -> String {
    let node = key.parent_doc.unwrap_or_else(|| non_null(root, key.schema));
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    if node.get("pattern").and_then(Value::as_str) == Some("^[0-9]+(ms|s|m|h|d)$") {
        return "duration".into();
    }
    let types: Vec<String> = match node.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .map(str::to_owned)
            .collect(),
        _ => vec!["table".into()],
    };
    let types: Vec<String> = types
        .into_iter()
        .map(|t| match t.as_str() {
            "array" => {
                let item = node
                    .get("items")
                    .and_then(|i| i.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("value");
                format!("array of {item}")
            }
            "object" => "table".into(),
            other => other.into(),
        })
        .collect();
    types.join(" or ")
}

/// One table cell: newlines joined, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The key table of the reference, from the schema.
fn key_table(root: &Value) -> String {
    let mut out = String::from("| key | type | default | |\n|---|---|---|---|\n");
    for key in schema_keys(root) {
        let default = match key.schema.get("default") {
            Some(value) => format!("`{}`", value),
            None => "—".into(),
        };
        let doc = key
            .schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            key.path,
            type_of(root, &key),
            cell(&default),
            cell(doc)
        ));
    }
    out
}

#[test]
fn the_editors_copy_of_the_schema_is_the_printed_schema() {
    let schema = schema();
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "draft 2020-12"
    );
    let path = assets::root().join(SCHEMA_COPY);
    if updating() {
        std::fs::write(&path, pretty(&schema)).unwrap();
    }
    let copy = std::fs::read_to_string(&path).unwrap_or_default();
    // Editors find it: the example's `#:schema` line and the taplo rule name the copy.
    let example = docs::read("examples/sluice.toml");
    assert_eq!(
        example.lines().next(),
        Some("#:schema ../docs/sluice.schema.json"),
        "examples/sluice.toml: the first line names the schema for editors"
    );
    assert!(
        docs::read(".taplo.toml").contains(&format!("path = \"{SCHEMA_COPY}\"")),
        ".taplo.toml: no rule naming {SCHEMA_COPY}"
    );
    assert!(
        copy == pretty(&schema),
        "{SCHEMA_COPY} is not what `sluiced --print-config-schema` prints: UPDATE_DOCS=1 \
         cargo test -p sluice-tests --test lints config_schema rewrites it"
    );
}

#[test]
fn the_reference_key_table_is_generated_from_the_schema() {
    let table = key_table(&schema());
    let path = assets::root().join(REFERENCE);
    let page = docs::read(REFERENCE);
    let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        panic!("{REFERENCE}: no {BEGIN} ... {END} block");
    };
    let current = &page[begin + BEGIN.len()..end];
    let wanted = format!("\n{table}");
    if updating() && current != wanted {
        let updated = format!("{}{wanted}{}", &page[..begin + BEGIN.len()], &page[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        current == wanted,
        "{REFERENCE}: the key table is not the schema's: UPDATE_DOCS=1 cargo test -p \
         sluice-tests --test lints config_schema rewrites it"
    );
}

/// The example with its commented-out keys and tables uncommented: `# unix = "…"` becomes
/// `unix = "…"`, `# [listen]` `[listen]`; prose comments stay comments.
fn uncommented(text: &str) -> String {
    text.lines()
        .map(|line| {
            let Some(rest) = line.strip_prefix("# ") else {
                return line.to_owned();
            };
            let head = rest.trim_start();
            let is_table = head.starts_with('[')
                && head
                    .trim_start_matches('[')
                    .starts_with(|c: char| c.is_ascii_alphabetic());
            let is_key = head.split_once('=').is_some_and(|(name, _)| {
                let name = name.trim();
                !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && rest.len() == head.len()
            });
            if is_table || is_key {
                rest.to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The key paths of a TOML table, in the schema's naming.
fn toml_keys(table: &toml::Table, prefix: &str, map: Option<&str>, out: &mut BTreeSet<String>) {
    for (name, value) in table {
        let segment: &str = match map {
            Some(map) => placeholder(map),
            None => name.as_str(),
        };
        let path = if prefix.is_empty() {
            segment.to_owned()
        } else {
            format!("{prefix}.{segment}")
        };
        match value {
            toml::Value::Table(inner) => {
                let next_map = (name == "policies" || name == "tiers") && map.is_none();
                toml_keys(inner, &path, next_map.then_some(name.as_str()), out);
            }
            toml::Value::Array(items)
                if items.iter().all(toml::Value::is_table) && !items.is_empty() =>
            {
                for item in items {
                    toml_keys(item.as_table().unwrap(), &format!("{path}[]"), None, out);
                }
            }
            _ => {
                out.insert(path);
            }
        }
    }
}

#[test]
fn the_example_names_every_key_of_the_schema() {
    let text = uncommented(&docs::read("examples/sluice.toml"));
    let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| {
        panic!("examples/sluice.toml with its commented keys uncommented is not TOML: {e}")
    });
    let mut found = BTreeSet::new();
    toml_keys(&table, "", None, &mut found);
    let root = schema();
    let missing: Vec<String> = schema_keys(&root)
        .into_iter()
        .map(|k| k.path)
        .filter(|path| !found.contains(path))
        .filter(|path| NOT_IN_EXAMPLE.iter().all(|(left_out, _)| left_out != path))
        .collect();
    assert!(
        missing.is_empty(),
        "examples/sluice.toml (the commented reference) lacks {missing:?}"
    );
}

/// Validates each TOML file against the schema with Python's jsonschema; the problems found,
/// one `file: path: message` line each.
fn validate(files: &[std::path::PathBuf]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let schema_file = dir.path().join("schema.json");
    std::fs::write(&schema_file, pretty(&schema())).unwrap();
    let script = r#"
import json, sys, tomllib
from jsonschema import Draft202012Validator
validator = Draft202012Validator(json.load(open(sys.argv[1])))
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    for error in sorted(validator.iter_errors(doc), key=str):
        print(f"{path}: {'.'.join(map(str, error.absolute_path))}: {error.message}")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&schema_file)
        .args(files)
        .output()
        .expect(PYTHON);
    assert!(
        out.status.success(),
        "{PYTHON}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_shipped_config_validates_against_the_schema_and_a_misspelt_key_does_not() {
    let root = assets::root();
    let mut files: Vec<_> = SHIPPED.iter().map(|f| root.join(f)).collect();
    let dir = tempfile::tempdir().unwrap();
    let example = dir.path().join("uncommented.toml");
    std::fs::write(&example, uncommented(&docs::read("examples/sluice.toml"))).unwrap();
    files.push(example);
    let problems = validate(&files);
    assert!(
        problems.is_empty(),
        "configs the schema refuses:\n{problems}"
    );

    let misspelt = dir.path().join("misspelt.toml");
    std::fs::write(
        &misspelt,
        "[listen]\nhtpp = \"127.0.0.1:8080\"\n\n[policies.public]\nalgorithm = \"token_bucket\"\nlimit = 1\nwindw = \"1s\"\n",
    )
    .unwrap();
    let problems = validate(&[misspelt]);
    for key in ["htpp", "windw"] {
        assert!(
            problems.contains(key),
            "the schema takes the misspelt {key}:\n{problems}"
        );
    }
}
