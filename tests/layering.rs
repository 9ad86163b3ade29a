//! The module graph has no cycles: each top-level module may use only the
//! modules its row of the table in `src/lib.rs` names. This test reads that
//! table and every source file's `crate::` paths, and fails on any import the
//! table does not allow, on a module the table does not list, and on a README
//! whose architecture table differs from it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer table of `src/lib.rs`: module -> the modules it may use, in the
/// order of the table's rows.
fn layer_table(lib: &str) -> Vec<(String, BTreeSet<String>)> {
    let mut rows = Vec::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! | `") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[0].trim_end_matches('`').to_string();
        let uses = cells
            .get(2)
            .map(|c| {
                c.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        rows.push((name, uses));
    }
    rows
}

/// Every `.rs` file of a top-level module: `src/m.rs` or the files under `src/m/`.
fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let single = src.join(format!("{module}.rs"));
    if single.exists() {
        return vec![single];
    }
    let mut files = Vec::new();
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The top-level modules a source file names through `crate::` in code
/// (comments and doc comments are not imports).
fn crate_paths(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = match code.find(" //") {
            Some(at) => &code[..at],
            None => code,
        };
        for (at, _) in code.match_indices("crate::") {
            // `flowplay::crate::` cannot occur; skip `$crate::` in macros
            if code[..at].ends_with('$') {
                continue;
            }
            let rest = &code[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
        // `use crate::{a, b::c}` groups
        if let Some(at) = code.find("crate::{") {
            let group = &code[at + "crate::{".len()..];
            for part in group.split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let table = layer_table(&lib);
    assert!(
        table.len() >= 10,
        "the layer table in src/lib.rs was not found"
    );

    // a module may use only modules listed in earlier rows
    let mut earlier = BTreeSet::new();
    for (module, uses) in &table {
        for used in uses {
            assert!(
                earlier.contains(used),
                "src/lib.rs: `{module}` may use `{used}`, which is not a row above it"
            );
        }
        earlier.insert(module.clone());
    }

    // every module declared in lib.rs has a row
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    let listed: BTreeSet<String> = table.iter().map(|(m, _)| m.clone()).collect();
    assert_eq!(declared, listed, "modules in lib.rs vs rows of its table");

    let allowed: BTreeMap<&String, &BTreeSet<String>> = table.iter().map(|(m, u)| (m, u)).collect();
    let mut violations = Vec::new();
    for (module, uses) in &allowed {
        for file in module_files(&src, module) {
            let source = std::fs::read_to_string(&file).unwrap();
            for used in crate_paths(&source) {
                if &used != *module && !uses.contains(&used) {
                    violations.push(format!(
                        "{} (module `{module}`) uses `crate::{used}`",
                        file.strip_prefix(root).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports the layer table of src/lib.rs does not allow:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_readme_shows_the_same_layer_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for line in lib.lines().filter(|l| l.starts_with("//! | `")) {
        let row = line.trim_start_matches("//! ");
        assert!(
            readme.lines().any(|l| l == row),
            "README.md's architecture table lacks the row\n{row}"
        );
    }
}

#[test]
fn the_reader_finds_crate_paths_in_code_only() {
    let source = "use crate::flow::Flow;\n/// see [`crate::app`]\nlet x = crate::stats::log_normal(&z); // crate::gpu\nuse crate::{rng::Rng, target};\n";
    let found: Vec<String> = crate_paths(source).into_iter().collect();
    assert_eq!(found, ["flow", "rng", "stats", "target"]);
}
