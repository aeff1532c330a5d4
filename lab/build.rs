// Includes the exercise named by QUEST_LAB_SOURCE (by absolute path, so compiler
// errors point at the learner's own file), or a stub that says how to build one.
use std::path::PathBuf;

// What every package that links MLX does (its rpath to libmlx, …).
#[path = "../build.rs"]
mod linking_mlx;

fn main() {
    linking_mlx::main();
    println!("cargo:rerun-if-env-changed=QUEST_LAB_SOURCE");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("exercise.rs");
    let code = match std::env::var("QUEST_LAB_SOURCE") {
        Ok(source) if !source.is_empty() => format!("include!({source:?});\n"),
        _ => "fn main() {\n    eprintln!(\"quest-lab holds no exercise: quest builds it with \
              QUEST_LAB_SOURCE set to one (try `quest run <lesson>`)\");\n    \
              std::process::exit(2);\n}\n"
            .to_owned(),
    };
    // Written only when it changes, so cargo does not rebuild for nothing.
    if std::fs::read_to_string(&out).ok().as_deref() != Some(code.as_str()) {
        std::fs::write(&out, code).unwrap();
    }
}
