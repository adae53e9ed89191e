//! The load loop: one keep-alive connection per concurrency slot, each sending one request,
//! reading one response, and again, on a single-threaded runtime so the load generator takes
//! about one core at most and the server under test gets the rest.

use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::task::LocalSet;

use crate::dist::{Dist, DistKind};
use crate::http1::{self, ParseError};
use crate::request::Template;
use crate::tally::{Outcome, Report, Tally};
use sluice_core::SplitMix;

/// Where the load goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    /// `HOST:PORT`.
    Tcp(String),
}

/// One run's parameters (the CLI flags of the README).
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub target: Target,
    pub policy: String,
    pub keys: u64,
    pub dist: DistKind,
    pub concurrency: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub cost: u64,
    pub path: String,
    /// Print a progress line on stderr every second.
    pub progress: bool,
}

impl BenchConfig {
    /// Defaults of the CLI for `target`.
    pub fn new(target: Target) -> Self {
        BenchConfig {
            target,
            policy: "public".to_owned(),
            keys: 1000,
            dist: DistKind::Uniform,
            concurrency: 64,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            cost: 1,
            path: "/v1/check".to_owned(),
            progress: true,
        }
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] io::Error),
    #[error("concurrency must be at least 1")]
    NoConcurrency,
    #[error("duration must be above zero")]
    NoDuration,
    #[error("histogram: {0}")]
    Histogram(String),
}

fn outcome_of(status: u16) -> Outcome {
    match status {
        200 => Outcome::Allowed,
        429 => Outcome::Rejected,
        _ => Outcome::Error,
    }
}

/// One run's shared clock marks.
#[derive(Debug, Clone, Copy)]
struct Window {
    measure_from: Instant,
    end: Instant,
}

impl Window {
    fn measured(&self, at: Instant) -> bool {
        at >= self.measure_from && at < self.end
    }
}

/// Runs the load described by `config` to the end and reports.
pub fn run(config: &BenchConfig) -> Result<Report, BenchError> {
    if config.concurrency == 0 {
        return Err(BenchError::NoConcurrency);
    }
    if config.duration.is_zero() {
        return Err(BenchError::NoDuration);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    let local = LocalSet::new();
    local.block_on(&runtime, drive(config))
}

async fn drive(config: &BenchConfig) -> Result<Report, BenchError> {
    let tally = Tally::new().map_err(|err| BenchError::Histogram(err.to_string()))?;
    let stats = Rc::new(RefCell::new(tally));
    let dist = Dist::new(config.dist, config.keys);
    let host = match &config.target {
        Target::Unix(_) => "localhost",
        Target::Tcp(addr) => addr.as_str(),
    };
    let template = Template::new(host, &config.path, &config.policy, dist.keys(), config.cost);

    let start = Instant::now();
    let window = Window {
        measure_from: start + config.warmup,
        end: start + config.warmup + config.duration,
    };
    let mut tasks = Vec::with_capacity(config.concurrency);
    for slot in 0..config.concurrency {
        let conn = Connection {
            target: config.target.clone(),
            template: template.clone(),
            dist: dist.for_connection(slot as u64, config.concurrency as u64),
            rng: SplitMix(slot as u64 + 1),
            buf: Vec::with_capacity(8192),
            stats: Rc::clone(&stats),
            window,
        };
        tasks.push(tokio::task::spawn_local(conn.run()));
    }
    let progress = config
        .progress
        .then(|| tokio::task::spawn_local(progress(Rc::clone(&stats), start, window)));

    tokio::time::sleep_until(window.end.into()).await;
    // Connections stop after their request in flight; one stuck on a server that no longer
    // answers is cut after a grace period (its request counts for nothing: it ended late).
    let grace = tokio::time::sleep(Duration::from_secs(2));
    tokio::pin!(grace);
    for task in &mut tasks {
        tokio::select! {
            _ = &mut *task => {}
            () = &mut grace => break,
        }
    }
    for task in &tasks {
        task.abort();
    }
    if let Some(progress) = progress {
        progress.abort();
    }

    let report = stats.borrow().report(config.duration.as_secs_f64());
    Ok(report)
}

async fn progress(stats: Rc<RefCell<Tally>>, start: Instant, window: Window) {
    let mut tick = tokio::time::interval_at(
        (start + Duration::from_secs(1)).into(),
        Duration::from_secs(1),
    );
    let mut last = 0u64;
    loop {
        let now = tick.tick().await.into_std();
        let s = stats.borrow();
        let phase = if now <= window.measure_from {
            "warmup "
        } else {
            "measure"
        };
        let p99 = s.quantile_us(0.99);
        eprintln!(
            "[{:>4.0}s] {phase} {:>8} req/s  allowed {} rejected {} errors {} (io/parse {})  p99 {:.0} µs",
            (now - start).as_secs_f64(),
            s.completed - last,
            s.allowed,
            s.rejected,
            s.errors,
            s.failed,
            p99
        );
        last = s.completed;
    }
}

/// One concurrency slot: a connection, reopened after any error, until the run ends.
struct Connection {
    target: Target,
    template: Template,
    dist: Dist,
    rng: SplitMix,
    buf: Vec<u8>,
    stats: Rc<RefCell<Tally>>,
    window: Window,
}

/// An I/O or framing failure: the connection is dropped and reopened.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    #[error("http: {0}")]
    Parse(#[from] ParseError),
    #[error("the server closed the connection")]
    Closed,
}

impl Connection {
    async fn run(mut self) {
        while Instant::now() < self.window.end {
            let result = match &self.target {
                Target::Unix(path) => match UnixStream::connect(path).await {
                    Ok(stream) => self.serve(stream).await,
                    Err(err) => Err(err.into()),
                },
                Target::Tcp(addr) => match TcpStream::connect(addr.as_str()).await {
                    Ok(stream) => {
                        // Small request, small answer: never wait for Nagle.
                        let _ = stream.set_nodelay(true);
                        self.serve(stream).await
                    }
                    Err(err) => Err(err.into()),
                },
            };
            match result {
                // The run is over, or the server asked to close: reconnect if time is left.
                Ok(()) => {}
                Err(_) => {
                    self.count_failure(Instant::now());
                    // Do not spin against a server that refuses connections.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    fn count_failure(&self, at: Instant) {
        let mut stats = self.stats.borrow_mut();
        stats.failed += 1;
        if self.window.measured(at) {
            stats.errors += 1;
        }
    }

    /// Requests on one connection until the run ends (`Ok`), the server closes it after a
    /// response (`Ok`), or an error.
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        mut stream: S,
    ) -> Result<(), ConnError> {
        self.buf.clear();
        loop {
            let key = self.dist.sample(&mut self.rng);
            let started = Instant::now();
            stream.write_all(self.template.for_key(key)).await?;
            let response = loop {
                if let Some(response) = http1::parse_response(&self.buf)? {
                    break response;
                }
                if self.buf.capacity() - self.buf.len() < 1024 {
                    self.buf.reserve(8192);
                }
                if stream.read_buf(&mut self.buf).await? == 0 {
                    return Err(ConnError::Closed);
                }
            };
            // One request in flight: anything after the response is unsolicited.
            self.buf.drain(..response.len);
            let done = Instant::now();
            {
                let mut stats = self.stats.borrow_mut();
                stats.completed += 1;
                if self.window.measured(done) {
                    stats.measured(outcome_of(response.status), done - started);
                }
            }
            if done >= self.window.end || response.close {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_outcomes() {
        assert_eq!(outcome_of(200), Outcome::Allowed);
        assert_eq!(outcome_of(429), Outcome::Rejected);
        for status in [201, 400, 404, 500, 503] {
            assert_eq!(outcome_of(status), Outcome::Error);
        }
    }

    #[test]
    fn zero_concurrency_or_duration_is_refused() {
        let mut config = BenchConfig::new(Target::Tcp("127.0.0.1:1".into()));
        config.concurrency = 0;
        assert!(matches!(run(&config), Err(BenchError::NoConcurrency)));
        config.concurrency = 1;
        config.duration = Duration::ZERO;
        assert!(matches!(run(&config), Err(BenchError::NoDuration)));
    }

    #[test]
    fn a_refused_connection_counts_errors_not_requests_answered() {
        // A port nobody listens on: every attempt fails at connect.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let mut config = BenchConfig::new(Target::Tcp(addr));
        config.concurrency = 2;
        config.duration = Duration::from_millis(200);
        config.warmup = Duration::ZERO;
        config.progress = false;
        let report = run(&config).unwrap();
        assert_eq!(report.allowed + report.rejected, 0);
        assert!(report.errors > 0);
        assert_eq!(report.requests, report.errors);
    }
}
