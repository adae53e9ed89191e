//! The `date` header's value, formatted once a second per thread rather than once an answer:
//! what hyper does for the answers it writes, so the answers of [`super`] carry the same
//! header at the same cost.

use std::cell::RefCell;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use httpdate::HttpDate;

/// `Sun, 06 Nov 1994 08:49:37 GMT`: an IMF-fixdate is always this long.
pub(super) const DATE_LENGTH: usize = 29;

/// The value of `date` now.
pub(super) fn now() -> [u8; DATE_LENGTH] {
    CACHED.with(|cached| {
        let mut cached = cached.borrow_mut();
        let now = SystemTime::now();
        if now >= cached.next {
            cached.render(now);
        }
        cached.text
    })
}

thread_local! {
    static CACHED: RefCell<Cached> = const {
        RefCell::new(Cached {
            text: [b' '; DATE_LENGTH],
            next: UNIX_EPOCH,
        })
    };
}

struct Cached {
    text: [u8; DATE_LENGTH],
    /// The start of the next second, when `text` is out of date.
    next: SystemTime,
}

impl Cached {
    fn render(&mut self, now: SystemTime) {
        let mut text = [b' '; DATE_LENGTH];
        // Formatting a date into its own length cannot fail; were it to, the previous text
        // stays (a second old) rather than a cut one.
        if write!(&mut text[..], "{}", HttpDate::from(now)).is_ok() {
            self.text = text;
        }
        let nanos = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        self.next = now + Duration::from_secs(1) - Duration::from_nanos(u64::from(nanos));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_is_an_http_date_of_now() {
        let text = now();
        let parsed = httpdate::parse_http_date(std::str::from_utf8(&text).unwrap()).unwrap();
        let age = SystemTime::now().duration_since(parsed).unwrap();
        assert!(age < Duration::from_secs(2), "{age:?}");
    }
}
