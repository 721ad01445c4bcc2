//! Every module's doc table lists exactly its files (issue 37), so that a
//! reader finds a module's parts in one place, and a file added, renamed or
//! removed without its line fails here instead of leaving the table stale.
//!
//! A module folder is a workspace member's `src/`, or a folder under it that
//! holds Rust files (unit-test `tests/` folders aside). Its module file
//! (`lib.rs` and/or `main.rs`, `mod.rs`, or the sibling `DIR.rs`) names, in its
//! leading `//!` doc, each `.rs` file and module folder (`name/`) beside it:
//! as the first cell of a markdown row, backticked (`` | `a.rs`, `b.rs` | what | ``),
//! or as the first words of a line of a ```` ```text ```` block (`a.rs  what`).
//! Test files (`tests.rs`, `*_tests.rs`, `tests/`) may be listed or not.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const MODULE_FILES: [&str; 3] = ["lib.rs", "main.rs", "mod.rs"];

#[test]
fn module_tables_list_exactly_their_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    let mut problems = Vec::new();
    for member in manifest["workspace"]["members"].as_array().unwrap() {
        let src = root.join(member.as_str().unwrap()).join("src");
        check_folder(root, &src, &mut problems);
    }
    problems.sort();
    let report = problems.join("\n");
    assert!(problems.is_empty(), "module tables out of date:\n{report}");
}

/// Checks the table of the module folder `dir`, then those of the module folders in it.
fn check_folder(root: &Path, dir: &Path, problems: &mut Vec<String>) {
    let mut module_files = MODULE_FILES.map(|name| dir.join(name)).to_vec();
    module_files.push(dir.with_extension("rs"));
    module_files.retain(|file| file.is_file());
    let mut entries = BTreeSet::new();
    for path in fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()) {
        let name = path.file_name().unwrap().to_str().unwrap();
        if path.is_dir() && name != "tests" && holds_rust(&path) {
            entries.insert(format!("{name}/"));
            check_folder(root, &path, problems);
        } else if name.ends_with(".rs") && !MODULE_FILES.contains(&name) {
            entries.insert(name.to_owned());
        }
    }
    let listed: BTreeSet<String> = module_files.iter().flat_map(|file| listed(file)).collect();
    let is_module_file = |name: &str| module_files.iter().any(|file| file.ends_with(name));
    let missing: Vec<_> = entries
        .difference(&listed)
        .filter(|name| !is_test(name))
        .collect();
    let stale: Vec<_> = listed
        .iter()
        .filter(|name| !is_module_file(name) && !dir.join(name).exists())
        .collect();
    if !missing.is_empty() || !stale.is_empty() {
        let files: Vec<_> = module_files
            .iter()
            .map(|file| file.strip_prefix(root).unwrap())
            .collect();
        let folder = dir.strip_prefix(root).unwrap().display();
        problems.push(format!(
            "{folder}/ (table in {files:?}): missing {missing:?}, stale {stale:?}"
        ));
    }
}

/// Whether `dir` holds a `.rs` file, here or in a folder under it.
fn holds_rust(dir: &Path) -> bool {
    fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        (path.is_dir() && holds_rust(&path)) || path.extension().is_some_and(|ext| ext == "rs")
    })
}

fn is_test(name: &str) -> bool {
    name == "tests.rs" || name == "tests/" || name.ends_with("_tests.rs")
}

fn is_name(word: &str) -> bool {
    word.ends_with(".rs") || (word.len() > 1 && word.ends_with('/'))
}

/// The names listed by the leading `//!` doc of `file`.
fn listed(file: &Path) -> Vec<String> {
    let text = fs::read_to_string(file).unwrap();
    let mut names = Vec::new();
    // The info string of the fenced block the line is in, if any.
    let mut fence = None;
    for line in text.lines().map_while(|line| line.strip_prefix("//!")) {
        let line = line.trim();
        if let Some(info) = line.strip_prefix("```") {
            fence = if fence.is_some() { None } else { Some(info) };
        } else if fence == Some("text") {
            // "a.rs, b.rs  what": the names up to the first one without a comma.
            for word in line.split_whitespace() {
                let name = word.strip_suffix(',').unwrap_or(word);
                if !is_name(name) {
                    break;
                }
                names.push(name.to_owned());
                if name == word {
                    break;
                }
            }
        } else if let (None, Some(row)) = (fence, line.strip_prefix('|')) {
            // "| `a.rs`, `b.rs` | what |": the backticked names of the first cell.
            let first_cell = row.split('|').next().unwrap();
            let quoted = first_cell.split('`').skip(1).step_by(2);
            names.extend(quoted.filter(|name| is_name(name)).map(str::to_owned));
        }
    }
    names
}
