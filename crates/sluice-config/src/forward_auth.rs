//! `[forward_auth]` compiled: how forward-auth finds the caller (the identity header a proxy
//! sets, and how many proxies append to `X-Forwarded-For`). Finding the caller of a request
//! with these rules is the HTTP layer's job (`http::caller`).

use http::HeaderName;

use super::error::FieldError;
use super::schema::ForwardAuthConfig;

/// The largest `forward_auth.trusted_hops`: more proxies than this in one chain is a
/// misconfiguration, not a topology.
pub const MAX_TRUSTED_HOPS: u64 = 64;

/// `[forward_auth]`, compiled: how the caller is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerRules {
    /// The header a proxy sets to the authenticated identity; `None`: keys are addresses only.
    pub identity_header: Option<HeaderName>,
    /// The client address is the `X-Forwarded-For` entry this many from the right (>= 1).
    pub trusted_hops: usize,
}

impl Default for CallerRules {
    fn default() -> Self {
        CallerRules {
            identity_header: None,
            trusted_hops: 1,
        }
    }
}

impl CallerRules {
    /// `[forward_auth]` checked: the header name must be a valid HTTP field name, the hop
    /// count between 1 and [`MAX_TRUSTED_HOPS`].
    pub fn compile(config: &ForwardAuthConfig) -> Result<CallerRules, Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = config.identity_header.trim();
        let identity_header = if name.is_empty() {
            None
        } else {
            match HeaderName::from_bytes(name.as_bytes()) {
                Ok(header) => Some(header),
                Err(_) => {
                    errors.push(FieldError::new(
                        "forward_auth.identity_header",
                        format!(
                            "{name:?} is not an HTTP header name (letters, digits and \
                             !#$%&'*+-.^_`|~, e.g. \"X-User-Id\"; \"\" = no identity header)"
                        ),
                    ));
                    None
                }
            }
        };
        if !(1..=MAX_TRUSTED_HOPS).contains(&config.trusted_hops) {
            errors.push(FieldError::new(
                "forward_auth.trusted_hops",
                format!(
                    "{} is not between 1 and {MAX_TRUSTED_HOPS}: it is the number of proxies \
                     that append to X-Forwarded-For (1 = the last entry)",
                    config.trusted_hops
                ),
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(CallerRules {
            identity_header,
            // Bounded by MAX_TRUSTED_HOPS above.
            trusted_hops: usize::try_from(config.trusted_hops).unwrap_or(1),
        })
    }
}
