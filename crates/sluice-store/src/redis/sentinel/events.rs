//! The Sentinel events a client follows, read from their Pub/Sub messages.
//!
//! Besides `+switch-master` (the failover is done), the leading sentinel publishes
//! `+selected-slave` the moment it has chosen the replica to promote, about a second before
//! `+switch-master` (it sees the promotion by its once-a-second `INFO`). The old master keeps
//! accepting writes in between, and what it takes then is lost when it is made a replica of the
//! new one; a client that stops writing to it at `+selected-slave` and moves to the replica as
//! soon as that answers `ROLE` as a master loses only what was not replicated at that instant.

/// The channels subscribed to on every sentinel.
pub(crate) const CHANNELS: [&str; 4] = [
    "+switch-master",
    "+selected-slave",
    "-failover-abort-slave-timeout",
    "-failover-abort-no-good-slave",
];

/// An event about the followed master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The sentinels name another master now.
    Switched,
    /// A failover began: `to` (`host:port`) is being promoted in place of `from`.
    Selected { from: String, to: String },
    /// The failover was given up: the master stays.
    Aborted,
}

/// The event of a message on `channel`, if it is about `master`.
///
/// Payloads (Sentinel's `%@` instance format): `+switch-master`: `<name> <old ip> <old port>
/// <new ip> <new port>`; `+selected-slave`: `slave <ip:port> <ip> <port> @ <name> <master ip>
/// <master port>`; the aborts: `master <name> <ip> <port>`.
pub(crate) fn parse(channel: &str, payload: &str, master: &str) -> Option<Event> {
    let words: Vec<&str> = payload.split(' ').collect();
    match channel {
        "+switch-master" => (words.first() == Some(&master)).then_some(Event::Switched),
        "+selected-slave" => match words.as_slice() {
            ["slave", _, ip, port, "@", name, master_ip, master_port] if *name == master => {
                Some(Event::Selected {
                    from: host_port(master_ip, master_port),
                    to: host_port(ip, port),
                })
            }
            _ => None,
        },
        _ if channel.starts_with("-failover-abort") => {
            (words.get(1) == Some(&master)).then_some(Event::Aborted)
        }
        _ => None,
    }
}

/// `host:port` as the lookups write it (an IPv6 host in brackets).
pub(crate) fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_about_this_master_only() {
        assert_eq!(
            parse("+switch-master", "m 127.0.0.1 1 127.0.0.1 2", "m"),
            Some(Event::Switched)
        );
        assert_eq!(
            parse("+switch-master", "other 127.0.0.1 1 127.0.0.1 2", "m"),
            None
        );
        assert_eq!(
            parse(
                "+selected-slave",
                "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1",
                "m"
            ),
            Some(Event::Selected {
                from: "127.0.0.1:1".into(),
                to: "127.0.0.1:2".into()
            })
        );
        assert_eq!(
            parse("+selected-slave", "slave ::1:2 ::1 2 @ m ::1 1", "m"),
            Some(Event::Selected {
                from: "[::1]:1".into(),
                to: "[::1]:2".into()
            })
        );
        assert_eq!(
            parse("-failover-abort-no-good-slave", "master m 127.0.0.1 1", "m"),
            Some(Event::Aborted)
        );
        assert_eq!(parse("+selected-slave", "garbage", "m"), None);
        assert_eq!(host_port("10.0.0.1", 6379), "10.0.0.1:6379");
    }
}
