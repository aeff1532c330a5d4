//! quest: a Rust workbook for LLM inference on MLX.
pub mod bench;
pub mod check;
pub mod course;
pub mod device;
pub mod grade;
pub mod kernels;
pub mod lab;
pub mod line;
pub mod lm;
pub mod physics;
pub mod progress;
pub mod render;
pub mod serve;
pub mod settings;
pub mod stats;

/// Every `.rs` file under `src/`, as (its path relative to `src/`, its text): for the
/// tests that read the code itself.
#[cfg(test)]
pub(crate) fn rust_sources() -> Vec<(std::path::PathBuf, String)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.strip_prefix(&src).unwrap().to_path_buf(), text));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// The rooms depend one way (docs/ARCHITECTURE.md): from each module's `crate::…`
    /// paths (outside its tests), the graph between top-level modules has no cycle.
    #[test]
    fn no_module_depends_on_one_that_depends_on_it() {
        let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (rel, text) in super::rust_sources() {
            let rel = rel.to_string_lossy();
            let top = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_owned();
            if ["lib", "main", "cli"].contains(&top.as_str()) {
                continue;
            }
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if name != top && !name.is_empty() {
                    deps.entry(top.clone()).or_default().insert(name);
                }
            }
        }
        // Depth-first: a module met again on the current path is a cycle.
        fn visit<'a>(
            m: &'a str,
            deps: &'a BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
        ) {
            if done.contains(m) {
                return;
            }
            assert!(!path.contains(&m), "a cycle: {} → {m}", path.join(" → "));
            path.push(m);
            for d in deps.get(m).into_iter().flatten() {
                visit(d, deps, path, done);
            }
            path.pop();
            done.insert(m);
        }
        let mut done = BTreeSet::new();
        for m in deps.keys() {
            visit(m, &deps, &mut Vec::new(), &mut done);
        }
        assert!(
            deps["device"].iter().all(|d| d == "settings"),
            "device depends only on settings"
        );
    }
}
