#![allow(non_upper_case_globals)]
#![allow(non_camel_case_types)]
#![allow(non_snake_case)]
#![allow(clippy::all)]

#[cfg(target_os = "macos")]
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

// quest patch: generated once with `regenerate-bindings.sh` (bindgen + libclang), so a
// Linux build needs neither. The script's --check mode proves this file is current.
#[cfg(not(target_os = "macos"))]
include!("bindings.rs");
