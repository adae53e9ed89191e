//! TLS for sluice, in one place: sluiced's listeners ([`server`]), its connections to Redis
//! and the daemon's own clients ([`client`]) all read their PEM files through [`pem`] and
//! name a failed handshake through [`reason`], so a certificate problem reads the same in
//! `--check-config`, a reload, a log line and a metric label.
//!
//! rustls with the ring provider only: nothing links OpenSSL, and the provider is chosen here
//! explicitly, never by whichever crypto features the dependency graph happens to enable.
//! Certificates are always verified: there is no switch that turns verification off.

pub mod client;
pub mod crypto;
pub mod pem;
pub mod reason;
pub mod server;

pub use self::client::{ClientFiles, client_config};
pub use self::crypto::{install_default_provider, provider};
pub use self::pem::PemError;
pub use self::reason::{Reason, reason_of, reason_of_tls};
pub use self::server::{ServerFiles, server_config};
