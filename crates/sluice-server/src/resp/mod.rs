//! The RESP listener (`listen.resp`): the Redis protocol, so that any Redis client is a sluice
//! client, pipelining included, and code written for redis-cell's `CL.THROTTLE` points at
//! sluiced unchanged.
//!
//! A check costs little next to HTTP framing, headers and JSON; over RESP a pipeline of
//! checks is one read, one pass through the limiter and one write. The listener shares the
//! daemon's accept loop, connection bound, deadlines and stop with the HTTP listeners, and its
//! checks are the HTTP API's own calls into the limiter.
//!
//! - [`frame`]: frames off the wire (the `redis-protocol` crate's codec) and their bounds.
//! - [`command`]: a frame's arguments read into a typed [`command::Command`];
//!   [`error`]: the error lines of refused commands.
//! - [`answer`]: commands answered (checks through the limiter), replies in order;
//!   [`reply`]: RESP2 replies written into the output buffer.
//! - [`scan`]: the common command frame read in one pass, without the codec.
//! - [`throttle`]: redis-cell's `CL.THROTTLE` on sluice-core's GCRA.
//! - [`connection`]: one connection's read-answer-write loop and its deadlines.

pub(crate) mod answer;
pub(crate) mod command;
pub mod connection;
pub(crate) mod error;
pub(crate) mod frame;
pub(crate) mod reply;
pub(crate) mod scan;
pub(crate) mod throttle;

#[cfg(test)]
mod properties;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::server::accept::ServeConnection;
use crate::server::linger::Lingering;
use crate::server::stop::Stop;
use crate::service::app::App;
use sluice_config::ConnectionSettings;

/// The answer past `listen.max_connections`, as Redis words it; then the connection closes.
pub const OVERLOADED: &[u8] = b"-ERR max number of clients reached\r\n";

/// Serves RESP on the connections of a listener, whatever their stream type.
#[derive(Debug, Clone)]
pub struct Resp {
    app: App,
    limits: ConnectionSettings,
    lingering: Lingering,
}

impl Resp {
    pub fn new(app: App, limits: ConnectionSettings, lingering: Lingering) -> Resp {
        Resp {
            app,
            limits,
            lingering,
        }
    }
}

impl<S> ServeConnection<S> for Resp
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn serve(&self, stream: S, stop: Stop) -> impl Future<Output = ()> + Send + 'static {
        connection::serve_resp(
            stream,
            self.app.clone(),
            self.limits,
            self.lingering.clone(),
            stop,
        )
    }
}
