//! Operation sharding rules of the pure Rust core.
