//! End-to-end tests of sluiced: one binary, one module per area, each test with its own daemon.

// Helpers here are test code too: a failed request should panic the test.
#![allow(clippy::unwrap_used)]

mod admin;
mod backends;
mod batch;
mod boundary;
mod caddy;
mod calendar;
mod candidate;
mod candidate_admin;
mod envoy;
mod envoy_yaml;
mod envoy_yaml_proxy;
mod errors;
mod features;
mod forward_auth;
mod headers;
mod layer;
mod lease;
mod nginx;
mod resp;
mod rls;
mod routes;
mod settings_race;
mod stacked;
mod through_proxy;
mod top;
mod traefik;
mod usage;
