//! Compiles `proto/*.proto` with protox, so no system `protoc` is needed anywhere.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "events.proto",
        "ingest.proto",
        "retrieval.proto",
        "health.proto",
        "compressor.proto",
        "pattern.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["."])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
