//! One immutable compile of everything the run-time settings decide, published whole: the
//! policies checks are decided on, the RLS rules that map descriptors to them, how
//! forward-auth finds the caller, and the sources they were compiled from (the file's
//! policies and the stored overrides and candidates, which admin changes are validated
//! against). The limiter holds the one swap of it; a check loads one snapshot and decides on
//! it from start to end, so it never sees policies from one version and rules from another.
//! Only the settings writer ([`writer`](super::writer)) publishes one.

use std::sync::Arc;

use sluice_config::forward_auth::CallerRules;
use sluice_config::rls_rules::Rules;

use crate::service::compiled::PolicySet;
use crate::service::overrides::RuntimeLimits;

/// What checks and answers read, as one version.
#[derive(Debug)]
pub struct Snapshot {
    pub policies: PolicySet,
    /// `[[rls.descriptors]]`.
    pub rls: Arc<Rules>,
    /// `[forward_auth]`.
    pub forward_auth: Arc<CallerRules>,
    /// What `policies` was compiled from.
    pub(crate) limits: RuntimeLimits,
}

/// A snapshot of `policies` alone (no RLS rule, the default forward-auth), for a limiter on
/// its own.
impl From<PolicySet> for Snapshot {
    fn from(policies: PolicySet) -> Snapshot {
        Snapshot {
            policies,
            rls: Arc::default(),
            forward_auth: Arc::default(),
            limits: RuntimeLimits::new(Default::default()),
        }
    }
}
