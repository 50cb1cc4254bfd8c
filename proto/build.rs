//! Compiles every `.proto` under `hpcagent/` with protox (a pure-Rust protobuf
//! compiler), so building needs no `protoc` on the machine.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect_protos(&root.join("hpcagent"), &mut files)?;
    files.sort();
    println!("cargo:rerun-if-changed={}", root.join("hpcagent").display());
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let descriptors = protox::compile(&files, [&root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}

fn collect_protos(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
