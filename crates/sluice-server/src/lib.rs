//! sluiced: the rate-limiter daemon (config, policies, HTTP API over UDS and TCP).
//!
//! The binary (`main.rs`) only parses arguments, binds, and handles signals; everything a test
//! needs to run a real daemon in process is here: [`App`], [`server::serve`], the clocks.

pub mod backend;
pub mod clock;
pub mod config;
pub mod http;
pub mod limiter;
pub mod metrics;
pub mod policy;
pub mod server;
#[cfg(test)]
mod testing;

use std::sync::Arc;
use std::time::Duration;

use sluice_store::Store;

use crate::clock::Clock;
use crate::config::{Config, FieldError};
use crate::limiter::Limiter;
use crate::metrics::Metrics;
use crate::policy::PolicySet;

/// Everything a request handler needs: cheap to clone.
#[derive(Debug, Clone)]
pub struct App {
    pub limiter: Arc<Limiter>,
    pub clock: Arc<dyn Clock>,
}

impl App {
    /// An app serving `config`'s policies on `store`, reading time from `clock`.
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<App, Vec<FieldError>> {
        let policies = PolicySet::compile(&config.policies)?;
        let timeout = Duration::from_millis(config.backend.timeout_ms());
        let limiter = Limiter::new(store, policies, Arc::new(Metrics::new()), timeout);
        Ok(App {
            limiter: Arc::new(limiter),
            clock,
        })
    }
}
