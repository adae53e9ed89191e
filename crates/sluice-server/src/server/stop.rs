//! The stop signal every listener and connection watches: cheap to clone, and a sender that
//! is gone counts as a stop, so nothing waits on a stop that can no longer come.

use tokio::sync::watch;

/// Sends the stop to every [`Stop`] made from it.
#[derive(Debug)]
pub struct StopSender(watch::Sender<bool>);

/// Completes once the daemon stops.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<bool>);

/// A stop signal and its first receiver.
pub fn channel() -> (StopSender, Stop) {
    let (tx, rx) = watch::channel(false);
    (StopSender(tx), Stop(rx))
}

impl StopSender {
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

impl Stop {
    /// Waits for the stop (at once if it was already sent).
    pub async fn stopped(&mut self) {
        // An error means the sender is gone, which also means stop.
        let _ = self.0.wait_for(|stop| *stop).await;
    }

    /// A future owning its receiver, for APIs that take a `'static` shutdown future.
    pub async fn into_wait(mut self) {
        self.stopped().await;
    }
}
