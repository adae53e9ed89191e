//! The commands the listener answers, read from a frame's arguments into a typed [`Command`]
//! borrowing them, or the [`CommandError`] a client is answered with. Pure: nothing here
//! touches the connection or the limiter.
//!
//! - `SLUICE.CHECK policy key [COST n] [TIER t] [ENDPOINT e]`: one check of `POST /v1/check`.
//! - `SLUICE.CHARGE policy key amount [TIER t]`: `POST /v1/charge`, what a request used
//!   charged to a usage policy (a negative amount refunds); the same reply as `SLUICE.CHECK`.
//! - `SLUICE.BATCH CHECK policy key [COST n] [TIER t] [ENDPOINT e] [CHECK ...]...`: the
//!   all-or-nothing batch; each check starts with the word `CHECK`.
//! - `CL.THROTTLE key max_burst count period [quantity]`: redis-cell's command.
//! - What clients send on their own when they connect or probe a server: `PING`, `ECHO`,
//!   `QUIT`, `SELECT 0`, `CLIENT SETNAME|GETNAME|SETINFO|ID`, `COMMAND`, `HELLO [2|3]`.
//!
//! Names and options are case-insensitive, as in Redis.

use super::error::{CommandError, integer, text};
use super::reply::shown;
use super::throttle::Throttle;
use crate::service::limiter::CheckInput;

/// Longest connection name `CLIENT SETNAME` keeps.
pub const MAX_CLIENT_NAME: usize = 256;

/// The commands answered, as `COMMAND COUNT` tells.
pub const COMMANDS: [&str; 11] = [
    "sluice.check",
    "sluice.charge",
    "sluice.batch",
    "cl.throttle",
    "ping",
    "echo",
    "quit",
    "select",
    "client",
    "command",
    "hello",
];

/// A command, borrowing its arguments from the read buffer.
// Variants are named after the Redis commands they read: `COMMAND` and `COMMAND COUNT` too.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    Check(CheckInput<'a>),
    Batch(Vec<CheckInput<'a>>),
    Throttle(Throttle<'a>),
    Ping(Option<&'a [u8]>),
    Echo(&'a [u8]),
    Quit,
    /// `SELECT 0`, the one database.
    Select,
    ClientSetName(&'a [u8]),
    ClientGetName,
    ClientSetInfo,
    ClientId,
    /// `COMMAND`, `COMMAND DOCS`, `COMMAND INFO ...`: an empty array, which clients that probe
    /// for command metadata take as "nothing to learn".
    CommandProbe,
    CommandCount,
    /// `HELLO [2|3 [SETNAME name]]`: `protocol` 3 switches the connection to RESP3, 2 back;
    /// `None` keeps it.
    Hello {
        protocol: Option<u8>,
        name: Option<&'a [u8]>,
    },
}

/// Reads a command from its arguments, its name first.
pub fn parse<'a>(args: &[&'a [u8]]) -> Result<Command<'a>, CommandError> {
    let Some((name, rest)) = args.split_first() else {
        return Err(CommandError::Unknown(String::new()));
    };
    let is = |expected: &str| name.eq_ignore_ascii_case(expected.as_bytes());
    if is("sluice.check") {
        let (input, used) = check_args(rest, "sluice.check")?;
        if let Some(extra) = rest.get(used) {
            return Err(unknown_option(extra));
        }
        Ok(Command::Check(input))
    } else if is("sluice.charge") {
        charge(rest).map(Command::Check)
    } else if is("sluice.batch") {
        batch(rest).map(Command::Batch)
    } else if is("cl.throttle") {
        Throttle::parse(rest).map(Command::Throttle)
    } else if is("ping") {
        match rest {
            [] => Ok(Command::Ping(None)),
            [message] => Ok(Command::Ping(Some(message))),
            _ => Err(CommandError::Arity("ping")),
        }
    } else if is("echo") {
        match rest {
            [message] => Ok(Command::Echo(message)),
            _ => Err(CommandError::Arity("echo")),
        }
    } else if is("quit") {
        Ok(Command::Quit)
    } else if is("select") {
        match rest {
            [db] => match integer("DB index", db, i64::MIN, i64::MAX)? {
                0 => Ok(Command::Select),
                _ => Err(CommandError::DbOutOfRange),
            },
            _ => Err(CommandError::Arity("select")),
        }
    } else if is("client") {
        client(rest)
    } else if is("command") {
        match rest.first() {
            Some(sub) if sub.eq_ignore_ascii_case(b"count") => Ok(Command::CommandCount),
            _ => Ok(Command::CommandProbe),
        }
    } else if is("hello") {
        hello(rest)
    } else {
        Err(CommandError::Unknown(shown(name)))
    }
}

fn client<'a>(args: &[&'a [u8]]) -> Result<Command<'a>, CommandError> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(CommandError::Arity("client"));
    };
    let is = |expected: &str| sub.eq_ignore_ascii_case(expected.as_bytes());
    match rest {
        [name] if is("setname") => client_name(name).map(Command::ClientSetName),
        [] if is("getname") => Ok(Command::ClientGetName),
        [] if is("id") => Ok(Command::ClientId),
        // LIB-NAME / LIB-VER: what the client library is; nothing sluiced keeps.
        [attribute, _] if is("setinfo") => {
            if attribute.eq_ignore_ascii_case(b"lib-name")
                || attribute.eq_ignore_ascii_case(b"lib-ver")
            {
                Ok(Command::ClientSetInfo)
            } else {
                Err(CommandError::Syntax(format!(
                    "CLIENT SETINFO takes LIB-NAME or LIB-VER, not '{}'",
                    shown(attribute)
                )))
            }
        }
        _ if ["setname", "getname", "id", "setinfo"]
            .iter()
            .any(|s| is(s)) =>
        {
            Err(CommandError::Arity("client"))
        }
        _ => Err(CommandError::UnknownSubcommand {
            command: "client",
            sub: shown(sub),
        }),
    }
}

/// A connection name: at most [`MAX_CLIENT_NAME`] bytes without spaces, as Redis allows.
fn client_name(name: &[u8]) -> Result<&[u8], CommandError> {
    if name.len() > MAX_CLIENT_NAME {
        return Err(CommandError::Invalid(format!(
            "a connection name is at most {MAX_CLIENT_NAME} bytes"
        )));
    }
    if name.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(CommandError::Invalid(
            "Client names cannot contain spaces, newlines or special characters.".to_owned(),
        ));
    }
    Ok(name)
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`: protocol 2 or 3; sluiced has no
/// passwords.
fn hello<'a>(args: &[&'a [u8]]) -> Result<Command<'a>, CommandError> {
    let Some((version, mut rest)) = args.split_first() else {
        return Ok(Command::Hello {
            protocol: None,
            name: None,
        });
    };
    let protocol = match integer("protocol version", version, i64::MIN, i64::MAX)? {
        2 => 2,
        3 => 3,
        _ => return Err(CommandError::NoProto),
    };
    let mut name = None;
    while let Some((option, after)) = rest.split_first() {
        match after {
            [value, more @ ..] if option.eq_ignore_ascii_case(b"setname") => {
                name = Some(client_name(value)?);
                rest = more;
            }
            _ if option.eq_ignore_ascii_case(b"auth") => {
                return Err(CommandError::Invalid(
                    "AUTH is not supported: sluiced has no passwords; the socket's file mode \
                     or a loopback address decides who connects"
                        .to_owned(),
                ));
            }
            _ => {
                return Err(CommandError::Syntax(format!(
                    "HELLO takes SETNAME name, not '{}'",
                    shown(option)
                )));
            }
        }
    }
    Ok(Command::Hello {
        protocol: Some(protocol),
        name,
    })
}

/// `policy key [COST n] [TIER t] [ENDPOINT e]` at the front of `args`, stopping at the end or
/// at the word `CHECK` (the next check of a batch); the check and the arguments it took.
fn check_args<'a>(
    args: &[&'a [u8]],
    command: &'static str,
) -> Result<(CheckInput<'a>, usize), CommandError> {
    let [policy, key, options @ ..] = args else {
        return Err(CommandError::Arity(command));
    };
    let mut input = CheckInput {
        policy: text("policy", policy)?,
        key: text("key", key)?,
        cost: None,
        tier: None,
        endpoint: None,
        mode: sluice_core::Mode::Consume,
        detail: None,
    };
    let mut used = 2;
    let mut rest = options;
    while let Some((option, after)) = rest.split_first() {
        if option.eq_ignore_ascii_case(b"check") {
            break;
        }
        let name = ["COST", "TIER", "ENDPOINT"]
            .into_iter()
            .find(|name| option.eq_ignore_ascii_case(name.as_bytes()))
            .ok_or_else(|| unknown_option(option))?;
        let Some(value) = after.first() else {
            return Err(CommandError::Syntax(format!("{name} needs a value")));
        };
        let given_before = match name {
            "COST" => input
                .cost
                .replace(integer("COST", value, 0, u64::MAX)?)
                .is_some(),
            "TIER" => input.tier.replace(text("TIER", value)?).is_some(),
            _ => input.endpoint.replace(text("ENDPOINT", value)?).is_some(),
        };
        if given_before {
            return Err(CommandError::Syntax(format!("{name} is given twice")));
        }
        rest = &after[1..];
        used += 2;
    }
    Ok((input, used))
}

/// `policy key amount [TIER t]` of `SLUICE.CHARGE`.
fn charge<'a>(args: &[&'a [u8]]) -> Result<CheckInput<'a>, CommandError> {
    let (policy, key, amount, tier) = match args {
        [policy, key, amount] => (policy, key, amount, None),
        [policy, key, amount, option, tier] if option.eq_ignore_ascii_case(b"tier") => {
            (policy, key, amount, Some(text("TIER", tier)?))
        }
        [_, _, _, option, ..] if !option.eq_ignore_ascii_case(b"tier") => {
            return Err(CommandError::Syntax(format!(
                "unknown option '{}'; SLUICE.CHARGE takes TIER",
                shown(option)
            )));
        }
        _ => return Err(CommandError::Arity("sluice.charge")),
    };
    // Exact on every backend: 2^53 either way.
    let bound = 1i64 << 53;
    let amount = integer("amount", amount, -bound, bound)?;
    CheckInput::charge(text("policy", policy)?, text("key", key)?, tier, amount)
        .map_err(|e| CommandError::Syntax(e.to_string()))
}

/// The checks of `SLUICE.BATCH`, each after the word `CHECK`.
fn batch<'a>(mut args: &[&'a [u8]]) -> Result<Vec<CheckInput<'a>>, CommandError> {
    if args.is_empty() {
        return Err(CommandError::Arity("sluice.batch"));
    }
    let mut checks = Vec::new();
    while let Some((word, rest)) = args.split_first() {
        if !word.eq_ignore_ascii_case(b"check") {
            return Err(CommandError::Syntax(format!(
                "each check of SLUICE.BATCH starts with CHECK, not '{}'",
                shown(word)
            )));
        }
        let (input, used) = check_args(rest, "sluice.batch")?;
        checks.push(input);
        args = &rest[used..];
    }
    Ok(checks)
}

fn unknown_option(option: &[u8]) -> CommandError {
    CommandError::Syntax(format!(
        "unknown option '{}'; SLUICE.CHECK takes COST, TIER and ENDPOINT",
        shown(option)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    fn parsed(line: &str) -> Result<Command<'_>, CommandError> {
        // `words` borrows `line`, and the command borrows what `words` points at.
        parse(&words(line))
    }

    fn error(line: &str) -> String {
        parsed(line).unwrap_err().to_string()
    }

    #[test]
    fn a_check_takes_its_options_in_any_order_and_case() {
        assert_eq!(
            parsed("sluice.check api user:1 tier pro COST 3 Endpoint /orders").unwrap(),
            Command::Check(CheckInput {
                policy: "api",
                key: "user:1",
                cost: Some(3),
                tier: Some("pro"),
                endpoint: Some("/orders"),
                mode: sluice_core::Mode::Consume,
                detail: None,
            })
        );
        assert!(matches!(
            parsed("SLUICE.CHECK api k").unwrap(),
            Command::Check(CheckInput { cost: None, .. })
        ));
    }

    #[test]
    fn bad_checks_name_their_problem() {
        for (line, expected) in [
            (
                "SLUICE.CHECK api",
                "ERR wrong number of arguments for 'sluice.check' command",
            ),
            (
                "SLUICE.CHECK api k COST",
                "ERR syntax error: COST needs a value",
            ),
            (
                "SLUICE.CHECK api k COST x",
                "ERR COST is not an integer from 0 to",
            ),
            ("SLUICE.CHECK api k COST -1", "ERR COST is not an integer"),
            (
                "SLUICE.CHECK api k COST 1 COST 2",
                "ERR syntax error: COST is given twice",
            ),
            (
                "SLUICE.CHECK api k TIER",
                "ERR syntax error: TIER needs a value",
            ),
            (
                "SLUICE.CHECK api k LIMIT 3",
                "ERR syntax error: unknown option 'LIMIT'",
            ),
            (
                "SLUICE.CHECK api k CHECK",
                "ERR syntax error: unknown option 'CHECK'",
            ),
            ("FLUSHALL", "ERR unknown command 'FLUSHALL'"),
            ("SELECT 1", "ERR DB index is out of range"),
            ("SELECT x", "ERR DB index is not an integer"),
            ("HELLO 4", "NOPROTO"),
            ("HELLO 2 AUTH u p", "ERR AUTH is not supported"),
            ("CLIENT KILL x", "ERR unknown subcommand 'KILL' of 'client'"),
            (
                "CLIENT SETNAME",
                "ERR wrong number of arguments for 'client' command",
            ),
            ("ECHO", "ERR wrong number of arguments for 'echo' command"),
        ] {
            let got = error(line);
            assert!(got.starts_with(expected), "{line}: {got}");
        }
        let not_utf8: [&[u8]; 3] = [b"SLUICE.CHECK", b"api", &[0xff]];
        assert_eq!(
            parse(&not_utf8).unwrap_err().to_string(),
            "ERR key must be UTF-8"
        );
    }

    #[test]
    fn a_batch_is_checks_each_after_the_word_check() {
        let Command::Batch(checks) =
            parsed("SLUICE.BATCH CHECK a k1 COST 2 check b k2 TIER CHECK").unwrap()
        else {
            panic!("not a batch");
        };
        assert_eq!(checks.len(), 2);
        assert_eq!((checks[0].policy, checks[0].cost), ("a", Some(2)));
        // A tier may be named CHECK: an option takes the word after it whatever it is.
        assert_eq!((checks[1].policy, checks[1].tier), ("b", Some("CHECK")));
        assert!(error("SLUICE.BATCH a k").contains("starts with CHECK"));
        assert!(error("SLUICE.BATCH CHECK a").contains("wrong number of arguments"));
        assert!(error("SLUICE.BATCH").contains("wrong number of arguments"));
    }

    #[test]
    fn connection_commands_are_what_clients_send() {
        assert_eq!(parsed("PING").unwrap(), Command::Ping(None));
        assert_eq!(parsed("ping hi").unwrap(), Command::Ping(Some(b"hi")));
        assert_eq!(parsed("SELECT 0").unwrap(), Command::Select);
        assert_eq!(
            parsed("CLIENT SETINFO LIB-NAME redis-py").unwrap(),
            Command::ClientSetInfo
        );
        assert_eq!(
            parsed("CLIENT SETNAME worker-1").unwrap(),
            Command::ClientSetName(b"worker-1")
        );
        assert_eq!(parsed("COMMAND DOCS").unwrap(), Command::CommandProbe);
        assert_eq!(parsed("COMMAND COUNT").unwrap(), Command::CommandCount);
        assert_eq!(
            parsed("HELLO 2 SETNAME me").unwrap(),
            Command::Hello {
                protocol: Some(2),
                name: Some(b"me")
            }
        );
        assert_eq!(
            parsed("HELLO 3").unwrap(),
            Command::Hello {
                protocol: Some(3),
                name: None
            }
        );
        assert_eq!(
            parsed("HELLO").unwrap(),
            Command::Hello {
                protocol: None,
                name: None
            }
        );
    }
}
