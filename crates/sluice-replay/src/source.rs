//! Reading one log file on a thread of its own: open it (gzip detected by its magic bytes and
//! decompressed on the fly), split it into lines with `memchr` over a large buffer, parse each
//! line into batches handed to the replay over a bounded channel (two batches in flight, and
//! used batches come back to be refilled). Lines that cannot be parsed are counted and the
//! first few kept with their line number; they never stop the file.

use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use flate2::read::MultiGzDecoder;

use crate::batch::Batch;
use crate::error::Error;
use crate::parse::LineParser;
use crate::report::model::{UNPARSED_TEXT_CHARS, UnparsedLine};

/// The longest line read; a longer one is unparsed (and skipped to its end).
pub(crate) const MAX_LINE: usize = 256 << 10;
/// Bytes read at once.
const READ_BUFFER: usize = 1 << 20;
/// Unparsed lines kept per file to show.
pub(crate) const UNPARSED_EXAMPLES: usize = 5;
/// gzip's magic bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A file opened for reading, its compressed bytes counted into a shared progress counter.
pub(crate) struct OpenFile {
    pub path: PathBuf,
    reader: Box<dyn Read + Send>,
}

impl std::fmt::Debug for OpenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenFile")
            .field("path", &self.path)
            .finish()
    }
}

/// A reader that adds the bytes it reads to a counter (the progress bar's position).
struct Counted<R> {
    inner: R,
    counter: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens `path`, answering its size on disk too; gzip when it starts with gzip's magic bytes.
pub(crate) fn open(path: &Path, counter: Arc<AtomicU64>) -> Result<(OpenFile, u64), Error> {
    let read_error = |source| Error::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    if metadata.is_dir() {
        return Err(read_error(io::Error::other("is a directory")));
    }
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]).map_err(read_error)? {
            0 => break,
            n => got += n,
        }
    }
    file.rewind().map_err(read_error)?;
    let counted = Counted {
        inner: file,
        counter,
    };
    let reader: Box<dyn Read + Send> = if got == 2 && magic == GZIP_MAGIC {
        Box::new(MultiGzDecoder::new(io::BufReader::with_capacity(
            READ_BUFFER,
            counted,
        )))
    } else {
        Box::new(counted)
    };
    Ok((
        OpenFile {
            path: path.to_owned(),
            reader,
        },
        metadata.len(),
    ))
}

/// What a file's thread answers when the file is done.
#[derive(Debug, Default)]
pub(crate) struct FileSummary {
    /// Lines read (blank lines and a CSV header excluded).
    pub lines: u64,
    pub unparsed: u64,
    pub examples: Vec<UnparsedLine>,
}

/// The batches of a file's thread: `Ok` batches in file order, an `Err` when the file cannot
/// be read further (the last message).
pub(crate) type BatchResult = Result<Batch, Error>;

/// Reads and parses `file` into batches sent on `batches`, reusing those that come back on
/// `recycled`. Stops early when the receiving side is gone.
pub(crate) fn run(
    mut file: OpenFile,
    mut parser: LineParser,
    batches: SyncSender<BatchResult>,
    recycled: Receiver<Batch>,
) -> FileSummary {
    let mut summary = FileSummary::default();
    let mut batch = Batch::with_capacity();
    let path = file.path.clone();
    let mut on_line = |number: u64, line: &[u8], too_long: bool| -> bool {
        if line.is_empty() || (number == 1 && parser.is_header(line)) {
            return true;
        }
        summary.lines += 1;
        let outcome = if too_long {
            Err(format!("longer than {MAX_LINE} bytes"))
        } else {
            parser.parse(number, line, &mut batch)
        };
        if let Err(reason) = outcome {
            summary.unparsed += 1;
            if summary.examples.len() < UNPARSED_EXAMPLES {
                summary.examples.push(UnparsedLine {
                    file: path.clone(),
                    line: number,
                    reason,
                    text: String::from_utf8_lossy(line)
                        .chars()
                        .take(UNPARSED_TEXT_CHARS)
                        .collect(),
                });
            }
        }
        if batch.is_full() {
            let next = recycled
                .try_recv()
                .unwrap_or_else(|_| Batch::with_capacity());
            if batches
                .send(Ok(std::mem::replace(&mut batch, next)))
                .is_err()
            {
                return false;
            }
            batch.clear();
        }
        true
    };
    let outcome = split_lines(&mut file.reader, &mut on_line);
    match outcome {
        Ok(()) => {
            if !batch.lines.is_empty() {
                // A closed receiver means the replay stopped: nothing left to tell it.
                let _ = batches.send(Ok(batch));
            }
        }
        Err(source) => {
            let _ = batches.send(Err(Error::Read { path, source }));
        }
    }
    summary
}

/// Calls `on_line(number, line, too_long)` for every line of `reader` (without its `\n` or
/// `\r\n`; a line past [`MAX_LINE`] has `too_long` set, and may be cut) until it answers
/// `false` or the input ends. Memory stays at one buffer whatever the line lengths.
fn split_lines(
    reader: &mut dyn Read,
    on_line: &mut dyn FnMut(u64, &[u8], bool) -> bool,
) -> io::Result<()> {
    let mut buffer = vec![0u8; READ_BUFFER];
    let mut filled = 0;
    let mut number = 0u64;
    // Inside a line already reported as too long: drop bytes up to its end.
    let mut skipping = false;
    loop {
        let read = match reader.read(&mut buffer[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled += read;
        let at_end = read == 0;
        let mut start = 0;
        while let Some(newline) = memchr::memchr(b'\n', &buffer[start..filled]) {
            let end = start + newline;
            if skipping {
                skipping = false;
            } else {
                number += 1;
                if !on_line(number, trim_cr(&buffer[start..end]), end - start > MAX_LINE) {
                    return Ok(());
                }
            }
            start = end + 1;
        }
        if at_end {
            if start < filled && !skipping {
                number += 1;
                on_line(
                    number,
                    trim_cr(&buffer[start..filled]),
                    filled - start > MAX_LINE,
                );
            }
            return Ok(());
        }
        if start == 0 && filled - start > MAX_LINE {
            // No line end within MAX_LINE bytes: report the line now, skip the rest of it.
            if !skipping {
                number += 1;
                if !on_line(number, &buffer[..MAX_LINE], true) {
                    return Ok(());
                }
                skipping = true;
            }
            filled = 0;
            continue;
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8]) -> Vec<(u64, Vec<u8>, bool)> {
        let mut seen = Vec::new();
        split_lines(&mut &input[..], &mut |n, line, long| {
            seen.push((n, line.to_vec(), long));
            true
        })
        .unwrap();
        seen
    }

    #[test]
    fn lines_with_and_without_a_final_newline() {
        assert_eq!(
            lines_of(b"a\r\nb\n\nc"),
            vec![
                (1, b"a".to_vec(), false),
                (2, b"b".to_vec(), false),
                (3, b"".to_vec(), false),
                (4, b"c".to_vec(), false)
            ]
        );
        assert_eq!(lines_of(b""), vec![]);
    }

    #[test]
    fn an_overlong_line_is_reported_once_and_skipped() {
        let mut input = vec![b'x'; READ_BUFFER * 2 + 10];
        input.extend_from_slice(b"\nnext\n");
        let seen = lines_of(&input);
        assert_eq!(seen.len(), 2);
        assert_eq!((seen[0].0, seen[0].2, seen[0].1.len()), (1, true, MAX_LINE));
        assert_eq!(seen[1], (2, b"next".to_vec(), false));
    }
}
