//! Test support: starts real servers (redis-server, a 6-node Redis Cluster) for tests.
