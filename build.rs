//! The binary's link settings. In a dynamic-backends build llama.cpp is
//! shared libraries: a packaged binary finds them beside itself (`$ORIGIN`),
//! a built one where llama-cpp-sys-2 built them (the `lib` folder beside its
//! `backends`; the copies it links into target/release lack the `.so.0` names
//! the binary asks for). The library's build script passes that folder on.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_DYNAMIC_BACKENDS").is_some() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN");
        if let Some(built) =
            std::env::var_os("DEP_POSRECALL_BACKENDS_DIR").map(std::path::PathBuf::from).and_then(|b| b.parent().map(|p| p.join("lib")))
        {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", built.display());
        }
        // A binary that picks its kernels for the CPU it meets must not
        // itself be compiled for this one.
        let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
        if flags.split('\x1f').any(|f| f.contains("target-cpu=native")) {
            panic!(
                "the dynamic-backends feature is for a binary that runs on other CPUs, but target-cpu=native builds posrecall for this one: build it with `RUSTFLAGS= cargo build --release --features dynamic-backends`"
            );
        }
    }
}
