//! sluiced: the rate-limiter daemon (config, policies, HTTP API over UDS and TCP).
