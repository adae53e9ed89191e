//! The listeners of `[listen]`, bound at start, or taken from the sockets the service manager
//! handed over: a handed-over socket named after a kind (`http`, `resp`, `grpc`, `metrics`) replaces
//! every configured address of that kind, and serves even when the config turns the kind off.
//!
//! A config whose `listen.unix` and `listen.http` are both empty (a socket unit owns the
//! address) is valid: it serves the HTTP API on the socket handed over as `http`. Only with
//! neither a configured address nor such a socket is there nothing to serve
//! ([`serves_http`]).

use std::io;
use std::path::Path;

use tokio::net::TcpListener;

use super::Listeners;
use super::activation::{Inherited, InheritedSocket, TokioListener};
use super::unix::{BoundUnix, bind_unix, remove_socket};
use crate::config::{ListenAddr, ListenSettings};

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

/// The listeners to serve, and how the startup line names them (`http:127.0.0.1:8080`).
pub async fn listeners(
    listen: &ListenSettings,
    mut inherited: Inherited,
) -> Result<(Listeners, Vec<String>), BindError> {
    let mut listeners = Listeners {
        connections: listen.connections,
        ..Listeners::default()
    };
    let mut described = Vec::new();
    let http = take(&mut inherited, "http", &mut described)?;
    let metrics = take(&mut inherited, "metrics", &mut described)?;
    let grpc = take(&mut inherited, "grpc", &mut described)?;
    let resp = take(&mut inherited, "resp", &mut described)?;
    let left = inherited.left();
    if !left.is_empty() {
        return Err(BindError::Unused(left.join(", ")));
    }
    let (http_handed, metrics_handed, grpc_handed, resp_handed) = (
        !http.is_empty(),
        !metrics.is_empty(),
        !grpc.is_empty(),
        !resp.is_empty(),
    );
    for socket in http {
        match socket {
            TokioListener::Tcp(tcp) => set_once(&mut listeners.http, tcp, "http", "TCP")?,
            TokioListener::Unix(unix) => {
                set_once(
                    &mut listeners.unix,
                    BoundUnix::inherited(unix),
                    "http",
                    "Unix",
                )?;
            }
        }
    }
    for socket in metrics {
        match socket {
            TokioListener::Tcp(tcp) => set_once(&mut listeners.metrics, tcp, "metrics", "TCP")?,
            TokioListener::Unix(_) => return Err(BindError::UnixMetrics),
        }
    }
    for socket in grpc {
        match socket {
            TokioListener::Tcp(tcp) => set_once(&mut listeners.grpc, tcp, "grpc", "TCP")?,
            TokioListener::Unix(unix) => {
                set_once(
                    &mut listeners.grpc_unix,
                    BoundUnix::inherited(unix),
                    "grpc",
                    "Unix",
                )?;
            }
        }
    }
    for socket in resp {
        match socket {
            TokioListener::Tcp(tcp) => set_once(&mut listeners.resp, tcp, "resp", "TCP")?,
            TokioListener::Unix(unix) => {
                set_once(
                    &mut listeners.resp_unix,
                    BoundUnix::inherited(unix),
                    "resp",
                    "Unix",
                )?;
            }
        }
    }

    // TCP first, the socket files last: a failure leaves no socket file behind.
    if !http_handed && let Some(addr) = listen.http {
        let tcp = bind_tcp(addr).await?;
        described.push(format!("http:{}", local(&tcp)));
        listeners.http = Some(tcp);
    }
    if !metrics_handed && let Some(addr) = listen.metrics {
        let tcp = bind_tcp(addr).await?;
        described.push(format!("metrics:{}", local(&tcp)));
        listeners.metrics = Some(tcp);
    }
    if !grpc_handed && let Some(ListenAddr::Tcp(addr)) = listen.grpc {
        let tcp = bind_tcp(addr).await?;
        described.push(format!("grpc:{}", local(&tcp)));
        listeners.grpc = Some(tcp);
    }
    if !resp_handed && let Some(ListenAddr::Tcp(addr)) = listen.resp {
        let tcp = bind_tcp(addr).await?;
        described.push(format!("resp:{}", local(&tcp)));
        listeners.resp = Some(tcp);
    }
    if !http_handed && let Some(path) = &listen.unix {
        listeners.unix = Some(bind_path(path, listen.unix_mode)?);
        described.push(format!("unix:{}", path.display()));
    }
    if !grpc_handed && let Some(ListenAddr::Unix(path)) = &listen.grpc {
        match bind_path(path, listen.unix_mode) {
            Ok(bound) => listeners.grpc_unix = Some(bound),
            Err(err) => {
                remove_created(&listeners);
                return Err(err);
            }
        }
        described.push(format!("grpc:unix:{}", path.display()));
    }
    if !resp_handed && let Some(ListenAddr::Unix(path)) = &listen.resp {
        match bind_path(path, listen.unix_mode) {
            Ok(bound) => listeners.resp_unix = Some(bound),
            Err(err) => {
                remove_created(&listeners);
                return Err(err);
            }
        }
        described.push(format!("resp:unix:{}", path.display()));
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

async fn bind_tcp(addr: std::net::SocketAddr) -> Result<TcpListener, BindError> {
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
