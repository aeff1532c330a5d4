//! Generates mlx-sys's Linux bindings from mlx-c's headers with the same bindgen
//! configuration upstream uses on Apple, plus the half-type fix described in PATCHES.md.
use std::path::PathBuf;

#[path = "../../src/bindgen_config.rs"]
mod bindgen_config;

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: bindgen-tool OUT.rs"));
    let mlx_c_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../src/mlx-c");
    let headers = bindgen_config::discover_headers(&mlx_c_root).expect("mlx-c headers");
    bindgen_config::builder(&mlx_c_root, &headers)
        // half.h gives u16 storage types outside ARM; mlx-rs reads float16_t as
        // bindgen's newtype (`.0`), so keep that shape.
        .blocklist_type("float16_t")
        .raw_line("#[repr(transparent)]")
        .raw_line("#[derive(Debug, Default, Copy, Clone, Hash, PartialEq, Eq)]")
        .raw_line("pub struct __BindgenFloat16(pub u16);")
        .raw_line("pub type float16_t = __BindgenFloat16;")
        .generate()
        .expect("Unable to generate bindings")
        .write_to_file(&out)
        .expect("write bindings");
}
