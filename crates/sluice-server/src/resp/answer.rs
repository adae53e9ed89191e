//! Answers the commands of one read: the checks go to the limiter (the very calls `POST
//! /v1/check` makes, so decisions, metrics, spans, top keys, shadow and fail modes are the
//! HTTP API's), and every reply is written in command order, in place in the connection's
//! output buffer.
//!
//! When the limiter decides without waiting (the memory store), each command is decided and
//! answered in turn: no future per check, no vector of decisions. When it waits on a network
//! (Redis), the checks of a pipeline are decided all at once, so that they share the store's
//! group calls and the pipeline costs one round trip rather than one per command; the
//! replies are then written in order.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use redis_protocol::resp2::types::BorrowedFrame;

use super::command::{COMMANDS, Command};
use super::error::CommandError;
use super::reply::{self, int, shown};
use super::throttle::{self, ThrottleReply};
use crate::service::app::App;
use crate::service::limiter::{LimitError, Verdict};
use crate::telemetry::TraceParent;

/// `CLIENT ID`s, unique for the daemon's life.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What one connection remembers between commands.
#[derive(Debug)]
pub struct Session {
    id: u64,
    name: Option<Box<[u8]>>,
    /// `HELLO 3` was answered: nulls and `HELLO`'s map are RESP3's.
    resp3: bool,
}

impl Session {
    pub fn new() -> Session {
        Session {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: None,
            resp3: false,
        }
    }
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

/// What the limiter decided for a command that asks it.
enum Decided {
    Check(Result<Verdict, LimitError>),
    Batch(Result<Vec<Verdict>, LimitError>),
    Throttle(Result<ThrottleReply, LimitError>),
}

/// Whether `command` asks the limiter.
fn asks_limiter(command: &Command<'_>) -> bool {
    matches!(
        command,
        Command::Check(_) | Command::Batch(_) | Command::Throttle(_)
    )
}

fn decides(command: &Result<Command<'_>, CommandError>) -> bool {
    command.as_ref().is_ok_and(asks_limiter)
}

/// Decides `command` at `now_ms`, the time its read was answered from.
async fn decide(
    app: &App,
    command: &Result<Command<'_>, CommandError>,
    now_ms: u64,
) -> Option<Decided> {
    let parent = TraceParent::Absent;
    match command {
        Ok(Command::Check(input)) => Some(Decided::Check(
            app.limiter.check_traced(input, now_ms, &parent).await,
        )),
        Ok(Command::Batch(inputs)) => Some(Decided::Batch(
            app.limiter
                .check_batch_traced(inputs, now_ms, &parent)
                .await,
        )),
        Ok(Command::Throttle(throttle)) => {
            Some(Decided::Throttle(throttle::run(app, throttle).await))
        }
        _ => None,
    }
}

/// Answers `commands` in order into `out`. The commands of one read arrived together: the
/// clock is read once for all of them (a pipeline of 16 checks read it 16 times, a tenth of
/// the instructions of a check beyond Redis's `INCR`).
pub async fn answer_all(
    app: &App,
    session: &mut Session,
    commands: &[Result<Command<'_>, CommandError>],
    out: &mut BytesMut,
) {
    let asking = commands.iter().filter(|c| decides(c)).count();
    let now_ms = if asking > 0 { app.clock.now_ms() } else { 0 };
    if asking <= 1 || app.limiter.never_waits() {
        for command in commands {
            let decided = if decides(command) {
                decide(app, command, now_ms).await
            } else {
                None
            };
            answer(out, session, command, decided);
        }
        return;
    }
    let decided = futures::future::join_all(
        commands
            .iter()
            .filter(|c| decides(c))
            .map(|command| decide(app, command, now_ms)),
    )
    .await;
    let mut decided = decided.into_iter();
    for command in commands {
        let decision = if decides(command) {
            decided.next().flatten()
        } else {
            None
        };
        answer(out, session, command, decision);
    }
}

/// Writes the reply to `command`, whose decision is `decided` when it asks the limiter.
fn answer(
    out: &mut BytesMut,
    session: &mut Session,
    command: &Result<Command<'_>, CommandError>,
    decided: Option<Decided>,
) {
    match command {
        Err(err) => reply::error(out, &err.to_string()),
        Ok(command) if asks_limiter(command) => match decided {
            Some(decision) => write_decided(out, decision),
            None => reply::error(out, "ERR internal error: no decision"),
        },
        Ok(command) => connection_command(out, session, command),
    }
}

fn write_decided(out: &mut BytesMut, decided: Decided) {
    match decided {
        Decided::Check(Ok(verdict)) => verdict_reply(out, &verdict),
        Decided::Batch(Ok(verdicts)) => {
            // `[all allowed, [check 1's fields], [check 2's], ...]`.
            reply::array_header(out, verdicts.len() + 1);
            reply::integer(out, i64::from(verdicts.iter().all(|v| v.allowed)));
            for verdict in &verdicts {
                verdict_reply(out, verdict);
            }
        }
        Decided::Throttle(Ok(answer)) => reply::integers(out, &answer),
        Decided::Check(Err(err)) | Decided::Batch(Err(err)) | Decided::Throttle(Err(err)) => {
            reply::error(out, &limit_error(&err));
        }
    }
}

/// `[allowed, limit, remaining, reset (unix s), retry_after (s), delay_ms, degraded]`.
fn verdict_fields(verdict: &Verdict) -> [i64; 7] {
    let d = &verdict.decision;
    [
        i64::from(verdict.allowed),
        int(d.limit),
        int(d.remaining),
        int(d.reset_secs()),
        int(d.retry_after_secs().unwrap_or(0)),
        int(d.delay_ms),
        i64::from(verdict.degraded),
    ]
}

fn verdict_reply(out: &mut BytesMut, verdict: &Verdict) {
    reply::integers(out, &verdict_fields(verdict));
}

/// The error line of a check the limiter refused.
fn limit_error(err: &LimitError) -> String {
    match err {
        LimitError::BadRequest { message, .. } => format!("ERR {message}"),
        LimitError::UnknownPolicy { policy, .. } => {
            format!("ERR unknown policy \"{}\"", shown(policy.as_bytes()))
        }
        LimitError::CostExceedsCapacity {
            policy,
            cost,
            capacity,
            ..
        } => format!(
            "ERR cost exceeds capacity: {cost} is more than policy \"{}\" can ever grant \
             ({capacity})",
            shown(policy.as_bytes())
        ),
        LimitError::BackendUnavailable => "UNAVAILABLE backend unavailable".to_owned(),
    }
}

fn connection_command(out: &mut BytesMut, session: &mut Session, command: &Command<'_>) {
    match command {
        Command::Ping(None) => reply::simple(out, "PONG"),
        Command::Ping(Some(message)) | Command::Echo(message) => reply::bulk(out, message),
        Command::Quit | Command::Select | Command::ClientSetInfo => reply::ok(out),
        Command::ClientSetName(name) => {
            session.name = (!name.is_empty()).then(|| Box::from(*name));
            reply::ok(out);
        }
        Command::ClientGetName => match &session.name {
            Some(name) => reply::bulk(out, name),
            None => reply::null(out, session.resp3),
        },
        Command::ClientId => reply::integer(out, int(session.id)),
        Command::CommandProbe => reply::empty_array(out),
        Command::CommandCount => reply::integer(out, int(COMMANDS.len() as u64)),
        Command::Hello { protocol, name } => {
            if let Some(protocol) = protocol {
                session.resp3 = *protocol == 3;
            }
            if let Some(name) = name {
                session.name = (!name.is_empty()).then(|| Box::from(*name));
            }
            hello(out, session);
        }
        // Answered by the limiter.
        Command::Check(_) | Command::Batch(_) | Command::Throttle(_) => {}
    }
}

/// `HELLO`'s map: a RESP3 map, or on RESP2 flattened into an array.
fn hello(out: &mut BytesMut, session: &Session) {
    use BorrowedFrame::{Array, BulkString, Integer};
    let fields = [
        BulkString(b"server"),
        BulkString(b"sluice"),
        BulkString(b"version"),
        BulkString(env!("CARGO_PKG_VERSION").as_bytes()),
        BulkString(b"proto"),
        Integer(if session.resp3 { 3 } else { 2 }),
        BulkString(b"id"),
        Integer(int(session.id)),
        BulkString(b"mode"),
        BulkString(b"standalone"),
        BulkString(b"role"),
        BulkString(b"master"),
        BulkString(b"modules"),
        Array(&[]),
    ];
    if session.resp3 {
        reply::map(out, &fields);
    } else {
        reply::frame(out, &Array(&fields));
    }
}
