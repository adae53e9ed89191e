//! A TCP proxy that stands for a long link between regions: every byte is delivered a fixed
//! one-way latency after it was sent, in each direction (bytes are not throttled, so pipelined
//! requests overlap as they do on a real link), and the link can be partitioned and healed
//! while clients use it.
//!
//! It runs on a runtime of its own (one thread), so it works under any test, and stops when
//! dropped. A connection that lived through a partition is closed at the heal, as a real
//! network's broken TCP sessions are: clients reconnect instead of reading a stream from which
//! bytes went missing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// How a partitioned link fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// Packets vanish: connections stay open (and new ones are accepted) but nothing is
    /// delivered, so callers wait until their timeout.
    Drop,
    /// Connections are reset and new ones closed at once, so callers fail fast.
    Refuse,
}

/// The link's state: `None` = up.
type LinkState = Option<Partition>;

/// A running proxy from a loopback port to `upstream`.
#[derive(Debug)]
pub struct LatencyProxy {
    addr: SocketAddr,
    latency_ms: Arc<AtomicU64>,
    link: watch::Sender<(u64, LinkState)>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LatencyProxy {
    /// Starts a proxy to `upstream` adding `one_way` in each direction.
    pub fn start(upstream: SocketAddr, one_way: Duration) -> LatencyProxy {
        let latency_ms = Arc::new(AtomicU64::new(
            u64::try_from(one_way.as_millis()).unwrap_or(u64::MAX),
        ));
        let (link, link_rx) = watch::channel((0_u64, None));
        let (stop, stop_rx) = oneshot::channel();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let latency = latency_ms.clone();
        let thread = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => panic!("proxy runtime: {e}"),
            };
            runtime.block_on(async move {
                let listener = match TcpListener::bind("127.0.0.1:0").await {
                    Ok(listener) => listener,
                    Err(e) => panic!("proxy bind: {e}"),
                };
                let _ = addr_tx.send(listener.local_addr());
                tokio::select! {
                    _ = stop_rx => {}
                    () = accept_loop(listener, upstream, latency, link_rx) => {}
                }
            });
        });
        let addr = match addr_rx.recv() {
            Ok(Ok(addr)) => addr,
            other => panic!("proxy did not start: {other:?}"),
        };
        LatencyProxy {
            addr,
            latency_ms,
            link,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://ADDR`, for a proxy in front of a Redis server.
    pub fn redis_url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Changes the one-way latency (bytes already in flight keep theirs).
    pub fn set_latency(&self, one_way: Duration) {
        self.latency_ms.store(
            u64::try_from(one_way.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Cuts the link.
    pub fn partition(&self, how: Partition) {
        self.link.send_modify(|(epoch, state)| {
            *epoch += 1;
            *state = Some(how);
        });
    }

    /// Restores the link; connections that lived through the partition are closed.
    pub fn heal(&self) {
        self.link.send_modify(|(epoch, state)| {
            *epoch += 1;
            *state = None;
        });
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    latency: Arc<AtomicU64>,
    link: watch::Receiver<(u64, LinkState)>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let (epoch, state) = *link.borrow();
        match state {
            Some(Partition::Refuse) => drop(client),
            Some(Partition::Drop) => {
                // Accepted, never answered; closed at the heal.
                let mut link = link.clone();
                tokio::spawn(async move {
                    let _client = client;
                    let _ = link.wait_for(|(e, _)| *e != epoch).await;
                });
            }
            None => {
                let latency = latency.clone();
                let link = link.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::select! {
                        () = pump(client_read, server_write, latency.clone(), link.clone(), epoch) => {}
                        () = pump(server_read, client_write, latency, link, epoch) => {}
                    }
                });
            }
        }
    }
}

/// Copies one direction, each chunk delivered `latency` after it was read. Under
/// `Partition::Drop` chunks are discarded; on `Refuse` or on a heal after a partition the
/// connection ends.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    latency: Arc<AtomicU64>,
    mut link: watch::Receiver<(u64, LinkState)>,
    epoch: u64,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    let reader = async move {
        let mut buf = vec![0_u8; 16 * 1024];
        loop {
            tokio::select! {
                changed = link.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let (now_epoch, state) = *link.borrow();
                    // Any partition ends a Refuse-mode connection; a heal ends a connection
                    // that lived through a partition.
                    if state == Some(Partition::Refuse) || (state.is_none() && now_epoch != epoch) {
                        return;
                    }
                }
                read = from.read(&mut buf) => {
                    let n = match read {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if link.borrow().1.is_some() {
                        continue;
                    }
                    let delay = Duration::from_millis(latency.load(Ordering::Relaxed));
                    if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = writer => {}
        () = reader => {}
    }
}
