// quest patch: upstream's build (cmake + Metal) stays as it was for Apple; every other
// platform builds mlx-c alone against an MLX wheel from PyPI. See PATCHES.md.
#[cfg(target_os = "macos")]
#[path = "build/apple.rs"]
mod apple;
#[cfg(not(target_os = "macos"))]
#[path = "build/linux.rs"]
mod linux;

fn main() {
    #[cfg(target_os = "macos")]
    apple::main();
    #[cfg(not(target_os = "macos"))]
    linux::main();
}
