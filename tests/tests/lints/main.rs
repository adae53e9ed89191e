//! The repository's own rules, checked as tests: no dependency cycle between crates, and the
//! client and configuration crates' trees kept lean ([`crates`]); no import cycle between files
//! or between the top-level modules of a crate ([`imports`]), at most one import running back
//! up the module tree ([`up_arrows`]), no source file over 700 lines ([`file_sizes`]); the
//! docs' links, contents and pages ([`docs`]), the book's build ([`book`]), the configs the
//! docs show ([`doc_configs`]) and the config's JSON Schema ([`config_schema`]); the manifests'
//! `rust-version` and packaging ([`manifests`]); the observability assets against what a real
//! daemon exports ([`drift`], [`assets`]) and the alert rules under promtool ([`alerts`]). A
//! binary of their own, apart from the end-to-end tests of the daemon's behaviour, so a layout
//! or docs failure reads as one.

// Helpers here are test code too: a failed request should panic the test.
#![allow(clippy::unwrap_used)]

mod alerts;
mod assets;
mod book;
mod config_schema;
mod crates;
mod doc_configs;
mod docs;
mod drift;
mod file_sizes;
mod imports;
mod manifests;
mod up_arrows;
