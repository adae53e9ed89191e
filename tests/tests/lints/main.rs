//! The repository's own rules, checked as tests: no dependency cycle between crates, and the
//! client and configuration crates' trees kept lean ([`crates`]); no import cycle between
//! files or between the top-level modules of a crate ([`imports`]), at most one import running
//! back up the module tree ([`up_arrows`]), the docs' links and contents ([`docs`]), the
//! observability assets against what a real daemon exports ([`drift`], [`assets`]) and the
//! alert rules under promtool ([`alerts`]). A binary of their own, apart from the end-to-end
//! tests of the daemon's behaviour, so a layout or docs failure reads as one.

// Helpers here are test code too: a failed request should panic the test.
#![allow(clippy::unwrap_used)]

mod alerts;
mod assets;
mod crates;
mod docs;
mod drift;
mod imports;
mod up_arrows;
