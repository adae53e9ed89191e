//! The connection-pooling HTTP/1.1 client.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use sluice_api::{BatchRequest, BatchResponse, CheckRequest, CheckResponse};
use tokio::net::{TcpStream, UnixStream};

use crate::ClientError;

/// Idle connections kept for reuse; more concurrent calls open more, closed after use.
const MAX_IDLE: usize = 64;

/// Where the daemon listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    /// `host:port`
    Tcp(String),
    /// `host:port` over TLS (feature `tls`: [`Client::https`]).
    Https(String),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
            Endpoint::Tcp(addr) => write!(f, "http://{addr}"),
            Endpoint::Https(addr) => write!(f, "https://{addr}"),
        }
    }
}

/// A response as it came: status, headers and body bytes.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl RawResponse {
    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| ClientError::Decode {
            status: self.status,
            message: format!("{e}: {}", String::from_utf8_lossy(&self.body)),
        })
    }

    /// A header's value as text, if present and valid.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The daemon's answer to one check.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: CheckResponse,
}

/// The daemon's answer to a batch.
#[derive(Debug, Clone)]
pub struct BatchOutcome {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: BatchResponse,
}

/// A client of one daemon. Cheap to share by reference across tasks.
#[derive(Debug)]
pub struct Client {
    endpoint: Endpoint,
    timeout: Duration,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    /// The TLS of an [`Endpoint::Https`].
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::Tls>,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Self {
        Client {
            endpoint,
            timeout: Duration::from_secs(5),
            idle: Mutex::new(Vec::new()),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// A client of the daemon listening with TLS on `host:port`, verified against the CA of
    /// `files` (the system's roots when none), presenting its client certificate if any
    /// (mTLS). The name verified is `host`.
    #[cfg(feature = "tls")]
    pub fn https(
        addr: impl Into<String>,
        files: &sluice_tls::ClientFiles,
    ) -> Result<Self, sluice_tls::PemError> {
        let addr = addr.into();
        let tls = crate::tls::Tls::new(&addr, files)?;
        let mut client = Client::new(Endpoint::Https(addr));
        client.tls = Some(tls);
        Ok(client)
    }

    /// A client of the daemon listening on the Unix socket at `path`.
    pub fn unix(path: impl Into<PathBuf>) -> Self {
        Client::new(Endpoint::Unix(path.into()))
    }

    /// A client of the daemon listening on TCP `host:port`.
    pub fn tcp(addr: impl Into<String>) -> Self {
        Client::new(Endpoint::Tcp(addr.into()))
    }

    /// Bounds every call (connect, send, read the whole answer).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `POST /v1/check` with one check.
    pub async fn check(&self, check: &CheckRequest) -> Result<CheckOutcome, ClientError> {
        let raw = self.post_json("/v1/check", check).await?;
        Ok(CheckOutcome {
            body: raw.json()?,
            status: raw.status,
            headers: raw.headers,
        })
    }

    /// `POST /v1/check` with an all-or-nothing batch.
    pub async fn check_batch(&self, batch: &BatchRequest) -> Result<BatchOutcome, ClientError> {
        let raw = self.post_json("/v1/check", batch).await?;
        Ok(BatchOutcome {
            body: raw.json()?,
            status: raw.status,
            headers: raw.headers,
        })
    }

    async fn post_json<T: serde::Serialize>(
        &self,
        path: &str,
        body: &T,
    ) -> Result<RawResponse, ClientError> {
        let body = serde_json::to_vec(body).map_err(|e| ClientError::Decode {
            status: 0,
            message: e.to_string(),
        })?;
        let raw = self
            .send(
                Method::POST,
                path,
                &[("content-type", "application/json")],
                body,
            )
            .await?;
        Ok(raw)
    }

    /// Any request, answered as it came (any status is a success here).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<RawResponse, ClientError> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "sluiced");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into()))?;
        tokio::time::timeout(self.timeout, self.round_trip(request))
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))?
    }

    async fn round_trip(&self, request: Request<Full<Bytes>>) -> Result<RawResponse, ClientError> {
        let mut sender = self.connection().await?;
        let response = sender.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        let reusable = parts
            .headers
            .get(http::header::CONNECTION)
            .is_none_or(|v| !v.as_bytes().eq_ignore_ascii_case(b"close"));
        if reusable {
            let mut idle = self.idle.lock();
            if idle.len() < MAX_IDLE {
                idle.push(sender);
            }
        }
        Ok(RawResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    /// A ready idle connection, or a new one.
    async fn connection(&self) -> Result<SendRequest<Full<Bytes>>, ClientError> {
        loop {
            let candidate = self.idle.lock().pop();
            let Some(mut sender) = candidate else { break };
            if sender.ready().await.is_ok() {
                return Ok(sender);
            }
        }
        let connect_error = |source| ClientError::Connect {
            endpoint: self.endpoint.to_string(),
            source,
        };
        match &self.endpoint {
            Endpoint::Unix(path) => {
                let stream = UnixStream::connect(path).await.map_err(connect_error)?;
                handshake(stream).await
            }
            Endpoint::Tcp(addr) => handshake(tcp(addr).await.map_err(connect_error)?).await,
            Endpoint::Https(addr) => {
                #[cfg(feature = "tls")]
                if let Some(tls) = &self.tls {
                    let stream = tcp(addr).await.map_err(connect_error)?;
                    return handshake(tls.connect(stream).await.map_err(connect_error)?).await;
                }
                Err(connect_error(std::io::Error::other(format!(
                    "https://{addr} needs Client::https (feature tls)"
                ))))
            }
        }
    }
}

/// A TCP connection to `addr`.
async fn tcp(addr: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    // Checks are tiny request/response pairs: Nagle would only add latency.
    stream.set_nodelay(true)?;
    Ok(stream)
}

async fn handshake<S>(stream: S) -> Result<SendRequest<Full<Bytes>>, ClientError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // The connection ends when the daemon closes it or the sender is dropped.
        let _ = connection.await;
    });
    Ok(sender)
}
