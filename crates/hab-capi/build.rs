//! Gives the shared library the name it is installed under (`libhab.so.<ABI version>`), so
//! that programs linked against the installed `libhab.so` load the version they were built for.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhab.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
