//! Client of the sluice daemon over a Unix socket or TCP.
