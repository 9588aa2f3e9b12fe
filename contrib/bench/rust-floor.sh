#!/usr/bin/env bash
# Builds the Rust floor: a SPANK plugin that does nothing but catch panics, linked as lama is
# (GCC's unwinder built in, -z nodelete, one LTO unit): what loading any Rust SPANK plugin costs,
# the floor under lama's own cost. A throwaway crate in DIR, outside the tree, no dependencies.
# Usage: contrib/bench/rust-floor.sh DIR   (SLURM_INCLUDE_DIR as for the plugin; prints the path
#   of the plugin it built)
set -euo pipefail
dir=${1:?usage: rust-floor.sh DIR}
inc=${SLURM_INCLUDE_DIR:-/usr/include}
version=$(awk '/define SLURM_VERSION_NUMBER/ {print $3}' "$inc/slurm/slurm_version.h")
eh=$(dirname "$(cc -print-file-name=libgcc_eh.a)")
mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<EOF
[package]
name = "floor"
version = "0.0.0"
edition = "2021"
[lib]
crate-type = ["cdylib"]
[workspace]
[profile.release]
lto = true
codegen-units = 1
EOF
cat > "$dir/build.rs" <<EOF
fn main() {
    println!("cargo:rustc-link-search=native=$eh");
    println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
EOF
cat > "$dir/src/lib.rs" <<EOF
#[no_mangle]
pub static plugin_name: [u8; 6] = *b"floor\0";
#[no_mangle]
pub static plugin_type: [u8; 6] = *b"spank\0";
#[no_mangle]
pub static plugin_version: u32 = $version;
#[no_mangle]
pub extern "C" fn slurm_spank_init(_: *mut u8, ac: i32, _: *const *const u8) -> i32 {
    std::panic::catch_unwind(|| if ac < 0 { panic!("{ac}") } else { 0 }).unwrap_or(-1)
}
EOF
cargo build --release --quiet --manifest-path "$dir/Cargo.toml" --target-dir "$dir/target"
echo "$dir/target/release/libfloor.so"
