//! Compiles the .proto files with protox (pure Rust), so no system `protoc` is needed,
//! and keeps the encoded descriptor set for gRPC server reflection.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(
        [
            "rebound/v1/messaging.proto",
            "rebound/v1/admin.proto",
            "rebound/v1/cluster.proto",
        ],
        ["proto"],
    )?;
    std::fs::write(
        out.join("rebound_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .bytes(".rebound.v1")
        .btree_map(".rebound.v1")
        // Bad input is INVALID_ARGUMENT, also when it does not decode (src/codec.rs).
        .codec_path("crate::codec::ProtoCodec")
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
