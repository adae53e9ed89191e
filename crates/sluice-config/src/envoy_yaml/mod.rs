//! envoyproxy/ratelimit's YAML files, read as it reads them, with nothing of sluice's config
//! schema: the files of `[rls] envoy_config` ([`load`]), one file into a domain's descriptor
//! tree ([`read`]), and the trees with the lookup of the limit a descriptor gets ([`tree`]).
//! A module apart from [`envoy`](crate::envoy), which lays the domains into the config, so the
//! schema can hold the domains ([`EnvoyDomains`]) without importing what imports it.

pub mod read;
pub mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use self::tree::{Domain, Found};
use crate::error::FieldError;

/// The field every problem of the YAML is reported under.
pub const FIELD: &str = "rls.envoy_config";

/// Bounds on what is read: files of a directory, and bytes of one file.
const MAX_FILES: usize = 1_000;
const MAX_FILE_BYTES: u64 = 4 << 20;

/// Every YAML domain, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvoyDomains {
    domains: BTreeMap<String, Domain>,
    /// `rls.envoy_config`, when set.
    path: Option<PathBuf>,
}

impl EnvoyDomains {
    /// `domains`, read from `path`.
    pub fn new(domains: BTreeMap<String, Domain>, path: PathBuf) -> EnvoyDomains {
        EnvoyDomains {
            domains,
            path: Some(path),
        }
    }

    /// The file or directory the domains were read from.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn get(&self, domain: &str) -> Option<&Domain> {
        self.domains.get(domain)
    }

    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    /// The limit of a descriptor of `domain`, if the domain is a YAML one and a limit matches.
    pub fn find<'a, 'e>(
        &'a self,
        domain: &str,
        entries: impl ExactSizeIterator<Item = (&'e str, &'e str)>,
    ) -> Option<Found<'a>> {
        self.domains.get(domain)?.find(entries)
    }
}

/// The domains of the file or directory at `path`.
pub fn load(path: &Path, errors: &mut Vec<FieldError>) -> BTreeMap<String, Domain> {
    let mut domains: BTreeMap<String, Domain> = BTreeMap::new();
    // Every domain named so far and its file, refused ones included.
    let mut files_of: BTreeMap<String, String> = BTreeMap::new();
    for file in files(path, errors) {
        let shown = file.display().to_string();
        let text = match read_bounded(&file) {
            Ok(text) => text,
            Err(why) => {
                errors.push(FieldError::new(FIELD, format!("{shown}: {why}")));
                continue;
            }
        };
        let (domain, problems) = read::read(&shown, &text);
        let first = files_of
            .get(&domain.name)
            .filter(|_| !domain.name.is_empty());
        if let Some(first) = first {
            errors.push(FieldError::new(
                FIELD,
                format!(
                    "{shown}: domain: {:?} is already the domain of {first}",
                    domain.name
                ),
            ));
        } else {
            files_of.insert(domain.name.clone(), shown.clone());
            if problems.is_empty() {
                domains.insert(domain.name.clone(), domain);
            }
        }
        errors.extend(problems.into_iter().map(|p| {
            let at = if p.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", p.path)
            };
            FieldError::new(FIELD, format!("{shown}: {at}{}", p.message))
        }));
    }
    domains
}

/// The files to read: `path` itself, or the [`yaml_files`] of the directory.
fn files(path: &Path, errors: &mut Vec<FieldError>) -> Vec<PathBuf> {
    let shown = path.display();
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) => {
            errors.push(FieldError::new(
                FIELD,
                format!("{shown}: cannot read: {err}"),
            ));
            return Vec::new();
        }
    };
    if !metadata.is_dir() {
        return vec![path.to_owned()];
    }
    let mut files = match yaml_files(path) {
        Ok(files) => files,
        Err(err) => {
            errors.push(FieldError::new(
                FIELD,
                format!("{shown}: cannot read: {err}"),
            ));
            return Vec::new();
        }
    };
    if files.len() > MAX_FILES {
        errors.push(FieldError::new(
            FIELD,
            format!(
                "{shown}: {} YAML files; at most {MAX_FILES} are read",
                files.len()
            ),
        ));
        files.truncate(MAX_FILES);
    }
    files
}

/// The `.yaml` and `.yml` files of directory `dir` that are read, in name order: not hidden
/// ones (a Kubernetes ConfigMap mount keeps its versions in `..data` directories).
pub fn yaml_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or(".");
            !name.starts_with('.')
                && (name.ends_with(".yaml") || name.ends_with(".yml"))
                && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// A file's text, refused past [`MAX_FILE_BYTES`].
fn read_bounded(file: &Path) -> Result<String, String> {
    let size = std::fs::metadata(file)
        .map_err(|e| format!("cannot read: {e}"))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{size} bytes; a file is at most {MAX_FILE_BYTES}"));
    }
    std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))
}
