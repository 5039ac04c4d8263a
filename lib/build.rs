//! Records build facts the run manifest needs: the exact llama-cpp-2 and
//! llama-cpp-sys-2 versions from Cargo.lock (the vendored llama.cpp carries no
//! git metadata, so the sys crate's version is what pins it), and the target.
//! What computes is not a build fact: the run file takes it from the devices
//! llama.cpp registers at run time.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    // The workspace's lock file, one folder up.
    let lock_path = Path::new(&manifest_dir).join("../Cargo.lock");
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

    // Where llama-cpp-sys-2 built llama.cpp's shared libraries, for the
    // binary's rpath in a dynamic-backends build: only a direct dependent of
    // llama-cpp-sys-2 is told, so the face's build script learns it from here
    // (`links = "posrecall"` makes this line reach it as
    // DEP_POSRECALL_BACKENDS_DIR).
    if let Some(dir) = std::env::var_os("DEP_LLAMA_BACKENDS_DIR") {
        println!("cargo:backends_dir={}", dir.to_string_lossy());
    }
}
