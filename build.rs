//! Records build facts the run manifest needs: the exact llama-cpp-2 and
//! llama-cpp-sys-2 versions from Cargo.lock (the vendored llama.cpp carries no
//! git metadata, so the sys crate's version is what pins it), and the target.
//! What computes is not a build fact: the run file takes it from the devices
//! llama.cpp registers at run time.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let lock_path = Path::new(&manifest_dir).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    println!("cargo:rerun-if-changed=build.rs");

    let lock: Option<toml::Table> = std::fs::read_to_string(&lock_path).ok().and_then(|s| s.parse().ok());
    let version_of = |name: &str| -> String {
        lock.as_ref()
            .and_then(|t| t.get("package"))
            .and_then(|p| p.as_array())
            .and_then(|pkgs| pkgs.iter().find(|p| p.get("name").and_then(|n| n.as_str()) == Some(name)))
            .and_then(|p| p.get("version"))
            .and_then(|v| v.as_str())
            .unwrap_or("unknown")
            .to_string()
    };
    println!("cargo:rustc-env=POSRECALL_LLAMA_CPP_2_VERSION={}", version_of("llama-cpp-2"));
    println!("cargo:rustc-env=POSRECALL_LLAMA_CPP_SYS_2_VERSION={}", version_of("llama-cpp-sys-2"));

    println!("cargo:rustc-env=POSRECALL_TARGET={}", std::env::var("TARGET").unwrap_or_default());

    if std::env::var_os("CARGO_FEATURE_DYNAMIC_BACKENDS").is_some() {
        // llama.cpp is then shared libraries: a packaged binary finds them
        // beside itself ($ORIGIN), a built one where llama-cpp-sys-2 built
        // them (the `lib` folder beside its `backends`; the copies it links
        // into target/release lack the `.so.0` names the binary asks for).
        println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN");
        if let Some(built) =
            std::env::var_os("DEP_LLAMA_BACKENDS_DIR").map(std::path::PathBuf::from).and_then(|b| b.parent().map(|p| p.join("lib")))
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
