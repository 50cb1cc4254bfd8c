//! Wire contracts of hpcagent.
//!
//! Owns the `.proto` files under `hpcagent/v1/` and the Rust code tonic and prost
//! generate from them at build time (with protox: no `protoc` needed). It holds
//! no behaviour: services and clients live in the crates that own them.

/// Version 1 of the hpcagent protocol.
pub mod v1 {
    tonic::include_proto!("hpcagent.v1");
}
