// Every binary needs an rpath to libmlx: mlx-sys's own link args do not reach
// dependents, so each package that links MLX emits it from DEP_MLX_LIBDIR.
fn main() {
    if let Ok(libdir) = std::env::var("DEP_MLX_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
        // MLX's CUDA build needs CUDA libraries that exist only where it runs.
        println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
    }
}
