//! Properties of reading and answering whatever a client sends: a pipeline of valid commands
//! cut anywhere yields exactly the commands it holds whole and waits for the rest; arbitrary
//! and mutated bytes never panic the reader, the command parser or the answers, and a reply
//! is always whole RESP; every frame is read alike with the one-pass scan and by the codec
//! alone.

use std::sync::Arc;

use bytes::BytesMut;
use proptest::prelude::*;

use super::answer::{Session, answer_all};
use super::connection::frames;
use super::frame::{self, MAX_ARRAY_HEADERS};
use crate::clock::ManualClock;
use crate::service::app::App;
use crate::service::stores::Stores;
use crate::testing;

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Arguments as clients send them: command words, numbers, and arbitrary bytes (CRLF and
/// `*` included).
fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            "SLUICE.CHECK",
            "SLUICE.BATCH",
            "CHECK",
            "CL.THROTTLE",
            "COST",
            "TIER",
            "ENDPOINT",
            "PING",
            "ECHO",
            "CLIENT",
            "SETNAME",
            "HELLO",
            "SELECT",
            "COMMAND",
            "p",
            "0",
            "1",
            "-1",
            "15",
            "30",
            "60",
            "99999999999999999999",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..24),
        "[a-z:*\r\n]{0,12}".prop_map(String::into_bytes),
    ]
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(arg(), 1..8)
}

fn app() -> App {
    let settings = testing::settings(
        "[policies.p]\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1s\"\nburst = 5\n",
    );
    App::new(
        settings,
        Stores::local(Arc::new(sluice_store::MemoryStore::default())),
        Arc::new(ManualClock::new(1_800_000_000_000)),
    )
}

/// Reads and answers `buf` as a connection would; the replies.
fn answer(app: &App, buf: &[u8]) -> BytesMut {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let read = frames(buf);
    assert!(read.consumed <= buf.len());
    let mut out = BytesMut::new();
    runtime.block_on(answer_all(
        app,
        &mut Session::new(),
        &read.commands,
        &mut out,
    ));
    out
}

/// Whether `out` is whole RESP frames only.
fn whole_resp(mut out: &[u8]) -> bool {
    while !out.is_empty() {
        match redis_protocol::resp2::decode::decode(out) {
            Ok(Some((_, len))) => out = &out[len..],
            _ => return false,
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_pipeline_cut_anywhere_yields_its_whole_commands_and_waits(
        commands in prop::collection::vec(command(), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let encoded: Vec<Vec<u8>> = commands.iter().map(|c| encode(c)).collect();
        // A frame whose payload holds as many `\n*` as the nesting bound allows headers is
        // refused by design (see `frame`).
        prop_assume!(encoded.iter().all(|f| {
            f.windows(2).filter(|w| w == b"\n*").count() < MAX_ARRAY_HEADERS
        }));
        let buf: Vec<u8> = encoded.concat();
        let at = cut.index(buf.len() + 1);
        let read = frames(&buf[..at]);
        prop_assert!(read.protocol_error.is_none(), "{:?}", read.protocol_error);
        // The commands wholly before the cut, up to a QUIT.
        let mut whole = 0;
        let mut end = 0;
        for frame in &encoded {
            if end + frame.len() > at {
                break;
            }
            end += frame.len();
            whole += 1;
        }
        if !read.close {
            prop_assert_eq!(read.commands.len(), whole);
            prop_assert_eq!(read.consumed, end);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_replies_are_whole(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let out = answer(&app(), &bytes);
        prop_assert!(whole_resp(&out));
    }

    #[test]
    fn mutated_commands_never_panic_and_replies_are_whole(
        commands in prop::collection::vec(command(), 1..4),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let app = app();
        let mut buf: Vec<u8> = commands.iter().map(|c| encode(c)).collect::<Vec<_>>().concat();
        let i = at.index(buf.len());
        buf[i] = byte;
        let end = cut.index(buf.len() + 1);
        let out = answer(&app, &buf[..end]);
        prop_assert!(whole_resp(&out));
        // Valid commands, each answered exactly once.
        let valid: Vec<u8> = commands.iter().map(|c| encode(c)).collect::<Vec<_>>().concat();
        let read = frames(&valid);
        let out = answer(&app, &valid);
        let mut replies = 0;
        let mut rest = &out[..];
        while let Ok(Some((_, len))) = redis_protocol::resp2::decode::decode(rest) {
            rest = &rest[len..];
            replies += 1;
        }
        prop_assert_eq!(replies, read.commands.len());
    }

    #[test]
    fn what_the_scan_reads_the_codec_reads_alike(
        commands in prop::collection::vec(command(), 1..4),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        mutate in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut buf: Vec<u8> = commands.iter().map(|c| encode(c)).collect::<Vec<_>>().concat();
        if mutate {
            let i = at.index(buf.len());
            buf[i] = byte;
        }
        let buf = &buf[..cut.index(buf.len() + 1)];
        if buf.first() == Some(&b'*') {
            prop_assert_eq!(frame::next(buf), frame::by_codec(buf));
        }
    }
}
