//! Progress of a replay on stderr (`indicatif`): bytes read of the files' total size, lines
//! replayed. Drawn only when asked for and stderr is a terminal, so logs and pipes stay clean.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The progress bar and the counter the reader threads add read bytes to.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
    read_bytes: Arc<AtomicU64>,
}

impl Progress {
    /// Hidden unless `wanted` and stderr is a terminal.
    pub(crate) fn new(wanted: bool) -> Self {
        let bar = if wanted && std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{wide_bar}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress {
            bar,
            read_bytes: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The counter of bytes read from disk.
    pub(crate) fn counter(&self) -> &Arc<AtomicU64> {
        &self.read_bytes
    }

    pub(crate) fn set_total(&self, bytes: u64) {
        self.bar.set_length(bytes);
    }

    /// Shows what has been read, and `lines` replayed.
    pub(crate) fn update(&self, lines: u64) {
        if self.bar.is_hidden() {
            return;
        }
        self.bar
            .set_position(self.read_bytes.load(Ordering::Relaxed));
        self.bar.set_message(format!("{lines} lines"));
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
