//! The listeners of `[listen]`, bound at start, or taken from the sockets the service manager
//! handed over: a handed-over socket named after a kind (`http`, `resp`, `grpc`, `metrics`) replaces
//! every configured address of that kind, and serves even when the config turns the kind off.
//!
//! A config whose `listen.unix` and `listen.http` are both empty (a socket unit owns the
//! address) is valid: it serves the HTTP API on the socket handed over as `http`. Only with
//! neither a configured address nor such a socket is there nothing to serve
//! ([`serves_http`]).

use std::io;
use std::net::SocketAddr;
use std::path::Path;

use tokio::net::TcpListener;

use super::Listeners;
use super::activation::{Inherited, InheritedSocket, TokioListener};
use super::unix::{BoundUnix, bind_unix, remove_socket};
use sluice_config::{ListenAddr, ListenSettings};

/// A listener that could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("cannot listen on {address}: {source}")]
    Bind { address: String, source: io::Error },
    #[error("the socket named {kind} handed over by the service manager: {source}")]
    Inherited {
        kind: &'static str,
        source: io::Error,
    },
    #[error("two {family} sockets named {kind} were handed over; one of each is served")]
    Twice {
        kind: &'static str,
        family: &'static str,
    },
    #[error("a Unix socket named metrics was handed over; the metrics listener is TCP only")]
    UnixMetrics,
    #[error(
        "sockets named {0} were handed over, but this daemon has no such listener; \
         the kinds served are http, resp, grpc and metrics"
    )]
    Unused(String),
}

/// Why a start serves nothing: said with exit code 2, as a config error.
pub const NOTHING_TO_SERVE: &str = "listen.unix and listen.http are both disabled and no socket \
named http was handed over (LISTEN_FDS): nothing to serve";

/// What `--check-config` notes of a config whose HTTP addresses are both empty.
pub const NEEDS_HANDED_SOCKET: &str = "listen.unix and listen.http are both disabled: the HTTP \
API is served only on a socket handed over as http (systemd socket activation, LISTEN_FDS; \
FileDescriptorName=http)";

/// Whether the config gives the HTTP API an address of its own.
pub fn configures_http(listen: &ListenSettings) -> bool {
    listen.unix.is_some() || listen.http.is_some()
}

/// Whether a start with `listen` and the sockets `inherited` serves the HTTP API: from the
/// config, or on a socket handed over as `http`.
pub fn serves_http(listen: &ListenSettings, inherited: &Inherited) -> bool {
    configures_http(listen) || inherited.has("http")
}

/// The kinds of listener, each named as its handed-over sockets are (`FileDescriptorName=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    /// The HTTP API: `listen.http` (TCP) and `listen.unix`.
    Http,
    /// `/metrics` only: `listen.metrics`, TCP only.
    Metrics,
    /// The Envoy RLS: `listen.grpc`, TCP or `unix:PATH`.
    Grpc,
    /// The Redis protocol: `listen.resp`, TCP or `unix:PATH`.
    Resp,
}

impl Endpoint {
    const ALL: [Endpoint; 4] = [
        Endpoint::Http,
        Endpoint::Metrics,
        Endpoint::Grpc,
        Endpoint::Resp,
    ];

    fn name(self) -> &'static str {
        match self {
            Endpoint::Http => "http",
            Endpoint::Metrics => "metrics",
            Endpoint::Grpc => "grpc",
            Endpoint::Resp => "resp",
        }
    }

    /// The configured TCP address and Unix socket path of this kind.
    fn configured(self, listen: &ListenSettings) -> (Option<SocketAddr>, Option<&Path>) {
        fn split(addr: Option<&ListenAddr>) -> (Option<SocketAddr>, Option<&Path>) {
            match addr {
                Some(ListenAddr::Tcp(tcp)) => (Some(*tcp), None),
                Some(ListenAddr::Unix(path)) => (None, Some(path.as_path())),
                None => (None, None),
            }
        }
        match self {
            Endpoint::Http => (listen.http, listen.unix.as_deref()),
            Endpoint::Metrics => (listen.metrics, None),
            Endpoint::Grpc => split(listen.grpc.as_ref()),
            Endpoint::Resp => split(listen.resp.as_ref()),
        }
    }

    /// Where this kind's TCP listener goes.
    fn tcp(self, listeners: &mut Listeners) -> &mut Option<TcpListener> {
        match self {
            Endpoint::Http => &mut listeners.http,
            Endpoint::Metrics => &mut listeners.metrics,
            Endpoint::Grpc => &mut listeners.grpc,
            Endpoint::Resp => &mut listeners.resp,
        }
    }

    /// Where this kind's Unix listener goes (`None`: TCP only).
    fn unix(self, listeners: &mut Listeners) -> Option<&mut Option<BoundUnix>> {
        match self {
            Endpoint::Http => Some(&mut listeners.unix),
            Endpoint::Metrics => None,
            Endpoint::Grpc => Some(&mut listeners.grpc_unix),
            Endpoint::Resp => Some(&mut listeners.resp_unix),
        }
    }

    /// How the startup line names a Unix socket of this kind bound at `path`.
    fn describe_unix(self, path: &Path) -> String {
        match self {
            Endpoint::Http => format!("unix:{}", path.display()),
            other => format!("{}:unix:{}", other.name(), path.display()),
        }
    }

    /// Puts the sockets handed over for this kind in their places.
    fn hand_over(
        self,
        sockets: Vec<TokioListener>,
        listeners: &mut Listeners,
    ) -> Result<(), BindError> {
        for socket in sockets {
            match socket {
                TokioListener::Tcp(tcp) => set_once(self.tcp(listeners), tcp, self.name(), "TCP")?,
                TokioListener::Unix(unix) => match self.unix(listeners) {
                    Some(slot) => set_once(slot, BoundUnix::inherited(unix), self.name(), "Unix")?,
                    None => return Err(BindError::UnixMetrics),
                },
            }
        }
        Ok(())
    }
}

/// The listeners to serve, and how the startup line names them (`http:127.0.0.1:8080`).
/// A kind with sockets handed over serves those instead of its configured addresses.
pub async fn listeners(
    listen: &ListenSettings,
    mut inherited: Inherited,
) -> Result<(Listeners, Vec<String>), BindError> {
    let mut listeners = Listeners {
        connections: listen.connections,
        ..Listeners::default()
    };
    let mut described = Vec::new();
    let mut handed = Vec::with_capacity(Endpoint::ALL.len());
    for endpoint in Endpoint::ALL {
        handed.push(take(&mut inherited, endpoint.name(), &mut described)?);
    }
    let left = inherited.left();
    if !left.is_empty() {
        return Err(BindError::Unused(left.join(", ")));
    }
    let mut to_bind = Vec::new();
    for (endpoint, sockets) in Endpoint::ALL.into_iter().zip(handed) {
        if sockets.is_empty() {
            to_bind.push(endpoint);
        } else {
            endpoint.hand_over(sockets, &mut listeners)?;
        }
    }
    // TCP first, the socket files last: a failure leaves no socket file behind.
    for &endpoint in &to_bind {
        if let (Some(addr), _) = endpoint.configured(listen) {
            let tcp = bind_tcp(addr).await?;
            described.push(format!("{}:{}", endpoint.name(), local(&tcp)));
            *endpoint.tcp(&mut listeners) = Some(tcp);
        }
    }
    for &endpoint in &to_bind {
        let (_, Some(path)) = endpoint.configured(listen) else {
            continue;
        };
        let bound = match bind_path(path, listen.unix_mode) {
            Ok(bound) => bound,
            Err(err) => {
                remove_created(&listeners);
                return Err(err);
            }
        };
        if let Some(slot) = endpoint.unix(&mut listeners) {
            *slot = Some(bound);
        }
        described.push(endpoint.describe_unix(path));
    }
    Ok((listeners, described))
}

/// Removes the socket files bound so far, when a later one fails: a failed start leaves none.
fn remove_created(listeners: &Listeners) {
    for bound in [&listeners.unix, &listeners.grpc_unix, &listeners.resp_unix]
        .into_iter()
        .flatten()
    {
        if let Some((path, inode)) = bound.created_file() {
            remove_socket(&path, inode);
        }
    }
}

/// The handed-over sockets named `kind`, ready for the runtime.
fn take(
    inherited: &mut Inherited,
    kind: &'static str,
    described: &mut Vec<String>,
) -> Result<Vec<TokioListener>, BindError> {
    inherited
        .take(kind)
        .into_iter()
        .map(|socket: InheritedSocket| {
            described.push(format!("{kind}:{} (handed over)", socket.describe()));
            socket
                .into_tokio()
                .map_err(|source| BindError::Inherited { kind, source })
        })
        .collect()
}

fn set_once<T>(
    slot: &mut Option<T>,
    value: T,
    kind: &'static str,
    family: &'static str,
) -> Result<(), BindError> {
    if slot.is_some() {
        return Err(BindError::Twice { kind, family });
    }
    *slot = Some(value);
    Ok(())
}

async fn bind_tcp(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| BindError::Bind {
            address: addr.to_string(),
            source,
        })
}

fn bind_path(path: &Path, mode: u32) -> Result<BoundUnix, BindError> {
    bind_unix(path, mode).map_err(|source| BindError::Bind {
        address: path.display().to_string(),
        source,
    })
}

fn local(tcp: &TcpListener) -> String {
    tcp.local_addr()
        .map_or_else(|_| "?".to_owned(), |addr| addr.to_string())
}
