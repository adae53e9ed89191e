//! Socket activation and readiness, the service manager's side of a start: the listening
//! sockets systemd (or `systemd-socket-activate`) hands over through `LISTEN_FDS` /
//! `LISTEN_FDNAMES`, sorted by name, and the `READY=1` sent to `$NOTIFY_SOCKET` once the
//! daemon listens. A handed-over socket is served instead of the configured address of its
//! kind, and its file is never removed: it belongs to the manager, which keeps it open across
//! restarts so that no client is refused meanwhile.

use std::io;
use std::os::unix::net::UnixListener;

/// The names a handed-over socket may carry (`FileDescriptorName=`), one per listener kind.
pub const KINDS: [&str; 4] = ["http", "resp", "grpc", "metrics"];

/// A listening socket the daemon was handed.
#[derive(Debug)]
pub enum InheritedSocket {
    Tcp(std::net::TcpListener),
    Unix(UnixListener),
}

/// The sockets handed over at start, by name.
#[derive(Debug, Default)]
pub struct Inherited {
    sockets: Vec<(String, InheritedSocket)>,
}

/// A handed-over socket the daemon cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error(
        "socket {index} handed over by the service manager is named {name:?}; name it one of \
         http, resp, grpc, metrics (FileDescriptorName=)"
    )]
    UnknownName { index: usize, name: String },
    #[error("socket {index} ({name}) handed over by the service manager: {source}")]
    NotAListener {
        index: usize,
        name: String,
        source: io::Error,
    },
}

impl Inherited {
    /// The sockets of `LISTEN_FDS` (checked against `LISTEN_PID`), named by
    /// `LISTEN_FDNAMES`; a single unnamed socket is `http`. Empty when the daemon was not
    /// socket-activated. Call it before any thread starts: it clears `LISTEN_FDS` and
    /// `LISTEN_PID`, so that no child process takes the sockets for its own.
    pub fn from_env() -> Result<Inherited, ActivationError> {
        let mut fds = listenfd::ListenFd::from_env();
        let count = fds.len();
        let names: Vec<String> = std::env::var("LISTEN_FDNAMES")
            .map(|names| names.split(':').map(str::to_owned).collect())
            .unwrap_or_default();
        let mut sockets = Vec::with_capacity(count);
        for index in 0..count {
            let name = match names.get(index).map(String::as_str) {
                Some(name) if KINDS.contains(&name) => name.to_owned(),
                None | Some("" | "unknown") if count == 1 => "http".to_owned(),
                other => {
                    return Err(ActivationError::UnknownName {
                        index,
                        name: other.unwrap_or_default().to_owned(),
                    });
                }
            };
            let not_a_listener = |source| ActivationError::NotAListener {
                index,
                name: name.clone(),
                source,
            };
            // A Unix stream socket, else a TCP one; anything else is an error naming both.
            let socket = match fds.take_unix_listener(index) {
                Ok(Some(unix)) => InheritedSocket::Unix(unix),
                Ok(None) => continue,
                Err(_) => match fds.take_tcp_listener(index) {
                    Ok(Some(tcp)) => InheritedSocket::Tcp(tcp),
                    Ok(None) => continue,
                    Err(err) => return Err(not_a_listener(err)),
                },
            };
            sockets.push((name, socket));
        }
        Ok(Inherited { sockets })
    }

    /// Whether the daemon was handed any socket.
    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// Whether a socket named `kind` was handed over.
    pub fn has(&self, kind: &str) -> bool {
        self.sockets.iter().any(|(name, _)| name == kind)
    }

    /// Takes the sockets named `kind`.
    pub fn take(&mut self, kind: &str) -> Vec<InheritedSocket> {
        let (taken, kept) = std::mem::take(&mut self.sockets)
            .into_iter()
            .partition(|(name, _)| name == kind);
        self.sockets = kept;
        taken.into_iter().map(|(_, socket)| socket).collect()
    }

    /// The names of the sockets not taken.
    pub fn left(&self) -> Vec<&str> {
        self.sockets.iter().map(|(name, _)| name.as_str()).collect()
    }
}

impl InheritedSocket {
    /// How the startup line names it.
    pub fn describe(&self) -> String {
        match self {
            InheritedSocket::Tcp(tcp) => tcp
                .local_addr()
                .map_or_else(|_| "tcp".to_owned(), |addr| addr.to_string()),
            InheritedSocket::Unix(unix) => unix
                .local_addr()
                .ok()
                .and_then(|addr| addr.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_else(|| "unix".to_owned()),
        }
    }

    /// As a tokio listener of its kind (inside the runtime).
    pub fn into_tokio(self) -> io::Result<TokioListener> {
        match self {
            InheritedSocket::Tcp(tcp) => {
                tcp.set_nonblocking(true)?;
                Ok(TokioListener::Tcp(tokio::net::TcpListener::from_std(tcp)?))
            }
            InheritedSocket::Unix(unix) => {
                unix.set_nonblocking(true)?;
                Ok(TokioListener::Unix(tokio::net::UnixListener::from_std(
                    unix,
                )?))
            }
        }
    }
}

/// A handed-over socket, ready for the runtime.
#[derive(Debug)]
pub enum TokioListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// Tells the service manager the daemon is serving (`READY=1`); nothing without
/// `$NOTIFY_SOCKET`. A manager that cannot be told is logged, not fatal.
pub fn notify_ready() {
    notify(&[sd_notify::NotifyState::Ready]);
}

/// Tells the service manager the daemon is stopping (`STOPPING=1`).
pub fn notify_stopping() {
    notify(&[sd_notify::NotifyState::Stopping]);
}

fn notify(state: &[sd_notify::NotifyState<'_>]) {
    // Without $NOTIFY_SOCKET this sends nothing and succeeds.
    if let Err(err) = sd_notify::notify(state) {
        tracing::warn!(error = %err, "cannot notify the service manager");
    }
}
