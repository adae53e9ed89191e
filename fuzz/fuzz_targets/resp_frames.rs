//! The RESP listener's reading of client bytes: frames decoded by the codec under the
//! listener's bounds, then each frame's arguments parsed into a command. Whatever the bytes,
//! nothing panics, nothing overflows the stack, and no more is consumed than was given.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_server::resp::connection::frames;

fuzz_target!(|data: &[u8]| {
    let read = frames(data);
    assert!(read.consumed <= data.len());
    if read.protocol_error.is_some() {
        assert!(read.close);
    }
});
