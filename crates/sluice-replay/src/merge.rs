//! Several files in time order: every file is read and parsed on its own thread (see
//! [`crate::source`]), and this k-way merge hands their lines to the replay by time. A run of
//! lines of one file is taken while none is later than the earliest head of the other files,
//! so files covering different hours cost one comparison per batch rather than per line, and
//! equal times keep the files' order. Within a file, lines keep their file order even when a
//! time goes back (the replay then holds each key at its latest time).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use crate::batch::{Batch, Line};
use crate::error::Error;
use crate::parse::LineParser;
use crate::source::{self, BatchResult, FileSummary};

/// Batches of one file in flight between its thread and the merge.
const BATCHES_IN_FLIGHT: usize = 2;

/// One file being read: its thread and the batch being consumed.
#[derive(Debug)]
struct Cursor {
    batches: Receiver<BatchResult>,
    recycle: Sender<Batch>,
    batch: Batch,
    next: usize,
    done: bool,
    thread: Option<JoinHandle<FileSummary>>,
}

impl Cursor {
    /// The time of the next line, fetching a batch when the current one is used up;
    /// `None` when the file is done.
    fn head(&mut self) -> Result<Option<u64>, Error> {
        while self.next >= self.batch.lines.len() {
            if self.done {
                return Ok(None);
            }
            match self.batches.recv() {
                Ok(Ok(batch)) => {
                    let used = std::mem::replace(&mut self.batch, batch);
                    // The thread may be finished: then the batch is simply dropped.
                    let _ = self.recycle.send(used);
                    self.next = 0;
                }
                Ok(Err(error)) => return Err(error),
                Err(_) => self.done = true,
            }
        }
        Ok(Some(self.batch.lines[self.next].at_ms))
    }
}

/// The files of a replay, each on its thread.
#[derive(Debug)]
pub(crate) struct Merge {
    cursors: Vec<Cursor>,
    paths: Vec<PathBuf>,
}

impl Merge {
    /// Opens every file (so an unreadable one fails before any work) and starts its thread,
    /// each with a clone of `parser`. Answers the merge and the files' total size on disk;
    /// bytes read are added to `read_bytes` as they are read.
    pub(crate) fn start(
        paths: &[PathBuf],
        parser: &LineParser,
        read_bytes: &Arc<AtomicU64>,
    ) -> Result<(Self, u64), Error> {
        let mut opened = Vec::with_capacity(paths.len());
        let mut total = 0;
        for path in paths {
            let (file, size) = source::open(path, read_bytes.clone())?;
            total += size;
            opened.push(file);
        }
        let mut cursors = Vec::with_capacity(opened.len());
        for file in opened {
            let (batch_tx, batch_rx) = mpsc::sync_channel(BATCHES_IN_FLIGHT);
            let (recycle_tx, recycle_rx) = mpsc::channel();
            let parser = parser.clone();
            let path = file.path.clone();
            let thread = std::thread::Builder::new()
                .name("sluice-replay-read".to_owned())
                .spawn(move || source::run(file, parser, batch_tx, recycle_rx))
                .map_err(|source| Error::Read { path, source })?;
            cursors.push(Cursor {
                batches: batch_rx,
                recycle: recycle_tx,
                batch: Batch::default(),
                next: 0,
                done: false,
                thread: Some(thread),
            });
        }
        Ok((
            Merge {
                cursors,
                paths: paths.to_vec(),
            },
            total,
        ))
    }

    /// Calls `each(file index, batch, line)` for every parsed line of every file in time
    /// order, and `after_batch(lines so far)` whenever a file's batch is used up (to update
    /// progress).
    pub(crate) fn run(
        &mut self,
        mut each: impl FnMut(usize, &Batch, &Line),
        mut after_batch: impl FnMut(u64),
    ) -> Result<(), Error> {
        let mut merged = 0u64;
        let mut heads: Vec<Option<u64>> = Vec::with_capacity(self.cursors.len());
        for cursor in &mut self.cursors {
            heads.push(cursor.head()?);
        }
        loop {
            // The earliest head, and the earliest among the others (the run's bound).
            let mut best: Option<(usize, u64)> = None;
            let mut bound = u64::MAX;
            for (index, head) in heads.iter().enumerate() {
                let Some(at) = *head else { continue };
                match best {
                    Some((_, best_at)) if at >= best_at => bound = bound.min(at),
                    Some((_, best_at)) => {
                        bound = bound.min(best_at);
                        best = Some((index, at));
                    }
                    None => best = Some((index, at)),
                }
            }
            let Some((index, _)) = best else {
                return Ok(());
            };
            let cursor = &mut self.cursors[index];
            loop {
                let lines = &cursor.batch.lines[cursor.next..];
                let run = lines.iter().take_while(|line| line.at_ms <= bound).count();
                for line in &lines[..run] {
                    each(index, &cursor.batch, line);
                }
                cursor.next += run;
                merged += run as u64;
                if cursor.next < cursor.batch.lines.len() {
                    break;
                }
                after_batch(merged);
                if cursor.head()?.is_none_or(|at| at > bound) {
                    break;
                }
            }
            heads[index] = cursor.head()?;
        }
    }

    /// Waits for every file's thread; answers the summaries in file order.
    pub(crate) fn finish(mut self) -> Result<Vec<FileSummary>, Error> {
        // Closing the channels stops threads still reading (the replay failed part way).
        let threads: Vec<_> = self
            .cursors
            .iter_mut()
            .map(|cursor| cursor.thread.take())
            .collect();
        drop(self.cursors);
        threads
            .into_iter()
            .zip(&self.paths)
            .map(|(thread, path)| {
                thread
                    .and_then(|thread| thread.join().ok())
                    .ok_or_else(|| Error::Read {
                        path: path.clone(),
                        source: std::io::Error::other("its reader thread panicked"),
                    })
            })
            .collect()
    }

    /// The files, in the order given.
    pub(crate) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}
