//! What a newcomer reads is checked against the code: the flag table of docs/running.md
//! against the clap definitions, the man pages in docs/man against `bankconf man`, and every
//! relative link and `#anchor` of the Markdown docs against the files and headings they name.

use clap::Args;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;

use common::{bankconf, temp_path, text};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The non-hidden flags of `bankconf run`, each with its environment variable.
fn run_flags() -> BTreeMap<String, Option<String>> {
    let command = bankconf::RunConfig::augment_args(clap::Command::new("run"));
    // `--config`, `--profile`, `--print-config`: declared beside it, as `--list`.
    let command = bankconf::internal::config::file::ConfigChoice::augment_args(command);
    let mut flags: BTreeMap<String, Option<String>> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
            a.get_long().map(|l| (format!("--{l}"), env))
        })
        .collect();
    // Declared beside `RunConfig`, in src/main.rs.
    flags.insert("--list".into(), None);
    flags
}

/// Each row of the "Flags" table of docs/running.md: its flags, and its variable.
fn table_rows() -> BTreeMap<String, Option<String>> {
    let doc = read(Path::new("docs/running.md"));
    let mut rows = BTreeMap::new();
    for line in doc.lines().filter(|l| l.starts_with("| `--")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let env = cells[2].trim_matches('`');
        for flag in cells[1].split(", ").map(|f| f.trim_matches('`')).filter(|f| f.starts_with("--")) {
            let env = (!env.is_empty()).then(|| env.to_string());
            assert!(rows.insert(flag.to_string(), env).is_none(), "{flag} has two rows");
        }
    }
    rows
}

#[test]
fn the_flag_table_lists_every_flag_of_run_and_no_other() {
    let (flags, rows) = (run_flags(), table_rows());
    let missing: Vec<&String> = flags.keys().filter(|f| !rows.contains_key(*f)).collect();
    let extra: Vec<&String> = rows.keys().filter(|f| !flags.contains_key(*f)).collect();
    assert!(missing.is_empty(), "docs/running.md's flag table lacks {missing:?}");
    assert!(extra.is_empty(), "docs/running.md's flag table lists {extra:?}, which `bankconf run` does not have");
    for (flag, env) in &flags {
        assert_eq!(&rows[flag], env, "{flag}: the table's variable is not the flag's");
    }
}

#[test]
fn the_man_pages_are_current() {
    let dir = temp_path("man");
    let output = bankconf(&["man", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let names = |d: &Path| -> BTreeSet<String> {
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    let committed = Path::new("docs/man");
    assert_eq!(names(&dir), names(committed), "rerun `cargo run -- man docs/man`");
    for name in names(&dir) {
        assert_eq!(read(&dir.join(&name)), read(&committed.join(&name)), "{name}: rerun `cargo run -- man docs/man`");
    }
}

/// `bankconf-run.1` names each option's `BANKCONF_*` variable, as its ENVIRONMENT section says,
/// and every page's `.TH` line names bankconf's version (no date: the committed pages do not
/// change from run to run; a release's archive dates them, scripts/package.sh).
#[test]
fn the_man_pages_name_each_variable_and_the_version() {
    let page = read(Path::new("docs/man/bankconf-run.1"));
    for (flag, env) in run_flags() {
        if let Some(env) = env {
            assert!(page.contains(&format!("\\fB{env}\\fR environment variable")), "{flag}: {env} not in the man page");
        }
    }
    let version = format!("\"bankconf {}\"", env!("CARGO_PKG_VERSION"));
    for entry in std::fs::read_dir("docs/man").unwrap() {
        let text = read(&entry.unwrap().path());
        let th = text.lines().find(|l| l.starts_with(".TH ")).unwrap_or_default();
        assert!(th.contains(&version), "{th}");
    }
}

/// The Markdown files a newcomer reads.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("cases/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Text outside fenced code blocks and inline code, where links are links.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                } else if !in_code {
                    out.push(c);
                }
            }
            out.push('\n');
        }
    }
    out
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped but `-` and `_`, spaces as
/// `-`; a repeated heading gets `-1`, `-2`, …
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file: its headings' slugs and its `<a id="…">` targets.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        if let Some(heading) = line.strip_prefix('#').map(|h| h.trim_start_matches('#')).filter(|h| h.starts_with(' '))
        {
            let text: String = heading.trim().replace('`', "");
            let base = slug(&text);
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
            *n += 1;
        }
        for (at, _) in line.match_indices("<a id=\"") {
            let rest = &line[at + 7..];
            out.insert(rest[..rest.find('"').unwrap_or(0)].to_string());
        }
    }
    out
}

/// Every `[text](target)` of a file, with its target.
fn links(markdown: &str) -> Vec<String> {
    let prose = prose(markdown);
    let mut out = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let rest = &prose[at + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_points_somewhere() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').map_or((link.as_str(), None), |(p, a)| (p, Some(a)));
            let target = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !target.exists() {
                broken.push(format!("{}: {link}: no file {}", file.display(), target.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if !anchors(&read(&target)).contains(anchor) {
                    broken.push(format!("{}: {link}: no heading or anchor #{anchor}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every source and doc file that names a section in words: `docs/ci.md "Expectations"`.
fn files_naming_sections() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = markdown_files();
    walk(Path::new("src"), &mut files);
    files.push(PathBuf::from("action.yml"));
    files
}

/// `README "Driver protocol"` names a section as a reader looks for it: some heading of that
/// file must start with those words.
#[test]
fn every_section_named_in_words_exists() {
    let pattern = regex::Regex::new(r#"(README|(?:docs/)?[a-z-]+\.md) "([^"]+)""#).unwrap();
    let mut broken = Vec::new();
    for file in files_naming_sections() {
        let text = read(&file);
        for found in pattern.captures_iter(&text) {
            let (name, title) = (&found[1], &found[2]);
            let target = match name {
                "README" => PathBuf::from("README.md"),
                n if n.starts_with("docs/") => PathBuf::from(n),
                n => PathBuf::from("docs").join(n),
            };
            let Ok(target_text) = std::fs::read_to_string(&target) else {
                broken.push(format!("{}: {name} \"{title}\": no file {}", file.display(), target.display()));
                continue;
            };
            let wanted = slug(title);
            if !anchors(&target_text).iter().any(|a| a.starts_with(&wanted)) {
                broken.push(format!("{}: {name} \"{title}\": no such heading", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "sections named that do not exist:\n{}", broken.join("\n"));
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("Evidence: a HAR of the run, latency, progress"), "evidence-a-har-of-the-run-latency-progress");
    assert_eq!(
        slug("Checking captured webhook deliveries: bankconf check-events"),
        "checking-captured-webhook-deliveries-bankconf-check-events"
    );
    let twice = anchors("# A\n## A\n```\n# B\n```\n<a id=\"c\"></a>");
    assert_eq!(twice, BTreeSet::from(["a".to_string(), "a-1".to_string(), "c".to_string()]));
}

/// A case's line in a generated list: id, section and level, then its title.
fn case_line(case: &bankconf::Case) -> String {
    format!("- `{}` ({}, {}): {}\n", case.id, case.section, level(case), case.title)
}

fn level(case: &bankconf::Case) -> String {
    case.level.to_string()
}

/// docs/cases.md, the whole catalogue: per area, each case with the mutants that catch it.
fn catalogue_page() -> String {
    use bankconf::sandbox::Mutant;
    let mut page = String::from(
        "# The cases\n\n<!-- generated from cases/*.toml and src/sandbox/faults/ by tests/docs.rs: \
         BANKCONF_BLESS=1 cargo test --test docs -->\n\nEvery case of the catalogue, by area: its id, \
         the spec section of its rule, its level ([levels](checks.md#levels)), what the target must \
         do, and the sandbox mutants that prove it can fail ([the sandbox](sandbox.md)). `bankconf \
         run --list` prints the same cases; `bankconf serve --list-mutants` the mutants.\n",
    );
    let mut area = "";
    for case in bankconf::internal::catalogue::all() {
        let this = case.id.split('.').next().unwrap_or_default();
        if this != area {
            area = this;
            page.push_str(&format!("\n## {area}\n\n| case | section | level | what the target must do | caught by |\n|---|---|---|---|---|\n"));
        }
        let caught: Vec<String> = Mutant::ALL
            .iter()
            .filter(|m| m.caught_by().contains(&case.id.as_str()))
            .map(|m| format!("`{}`", m.name()))
            .collect();
        page.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            case.id,
            case.section,
            level(case),
            case.title.replace('|', "\\|"),
            caught.join(", ")
        ));
    }
    page
}

/// Lists of cases inside the docs are generated, never written by hand: docs/cases.md whole,
/// and each `<!-- cases:begin need=NEED -->` block (the cases that need NEED). A new case
/// appears in them by `BANKCONF_BLESS=1 cargo test --test docs`.
#[test]
fn the_case_lists_of_the_docs_are_generated_from_the_catalogue() {
    let bless = std::env::var_os("BANKCONF_BLESS").is_some();
    let mut stale = Vec::new();
    let page = catalogue_page();
    let path = Path::new("docs/cases.md");
    if std::fs::read_to_string(path).ok().as_deref() != Some(page.as_str()) {
        if bless {
            std::fs::write(path, &page).expect("write docs/cases.md");
        } else {
            stale.push("docs/cases.md".to_string());
        }
    }
    const END: &str = "<!-- cases:end -->";
    for path in markdown_files() {
        let text = read(&path);
        let mut new = String::new();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("<!-- cases:begin need=") {
            let open_end = start + rest[start..].find("-->\n").expect("a cases:begin line ends with -->") + 4;
            let need = rest[start + "<!-- cases:begin need=".len()..open_end - 4].trim();
            let end = rest[open_end..].find(END).map(|e| open_end + e).expect("a cases:begin block has its cases:end");
            let list: String = bankconf::internal::catalogue::all()
                .iter()
                // `need=second-key` names `Need::SecondKey`.
                .filter(|c| c.needs.iter().any(|n| format!("{n:?}").to_lowercase() == need.replace('-', "")))
                .map(case_line)
                .collect();
            assert!(!list.is_empty(), "{}: no case needs {need:?}", path.display());
            new.push_str(&rest[..open_end]);
            new.push_str(&list);
            rest = &rest[end..];
        }
        new.push_str(rest);
        if new != text {
            if bless {
                std::fs::write(&path, new).expect("write a doc");
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(stale.is_empty(), "case lists out of date in {stale:?}: BANKCONF_BLESS=1 cargo test --test docs");
}

/// The item pages `cargo doc --no-deps` writes for the library (`kind.Name.html`, at the crate's
/// root and in `sandbox/`), by name; the redirect pages rustdoc leaves at a re-exported item's
/// defining path are not pages of their own, and `internal` is hidden.
fn doc_item_pages(doc: &Path) -> Vec<String> {
    let page = regex::Regex::new(r"^(?:struct|enum|fn|constant|static|trait|type|macro|union)\.(\w+)\.html$").unwrap();
    let mut names = Vec::new();
    let mut dirs = vec![doc.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if file != "src" && file != "internal" {
                    dirs.push(path);
                }
            } else if let Some(name) = page.captures(&file).map(|c| c[1].to_string()) {
                if !read(&path).contains("http-equiv=\"refresh\"") {
                    names.push(name);
                }
            }
        }
    }
    names.sort();
    names
}

/// The items docs/library.md's "What is public" names (each a backticked identifier, before the
/// paragraph on `bankconf::internal`), and the number it says.
fn library_md_items() -> (Vec<String>, usize) {
    let doc = read(Path::new("docs/library.md"));
    let section = doc.split("## What is public").nth(1).expect("a \"What is public\" section");
    let section = section.split("`bankconf::internal`, hidden").next().unwrap();
    let count = regex::Regex::new(r"Exactly these (\d+) items").unwrap().captures(section).expect("its count")[1]
        .parse()
        .unwrap();
    let ident = regex::Regex::new(r"`([A-Za-z_][A-Za-z0-9_]*)`").unwrap();
    let mut names: Vec<String> = ident.captures_iter(section).map(|c| c[1].to_string()).collect();
    names.sort();
    names.dedup();
    (names, count)
}

/// docs/library.md promises exactly the public surface `cargo doc` shows: a re-export added or
/// a type made reachable without a line there fails here. Slow (it documents the crate in a
/// target directory of its own, minutes when cold), so the full matrix runs it (.ci/run).
#[test]
#[ignore = "runs cargo doc (minutes when cold): the full matrix runs it"]
fn library_md_lists_the_item_pages_of_cargo_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `.ci/run` has just built the documentation of this tree (its `cargo doc` step), and names
    // it: no second build.
    let doc = match std::env::var_os("BANKCONF_DOC_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
            // Its own directory: the one `cargo test` runs from is locked while the tests run.
            let target = target.join("library-doc");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["doc", "--no-deps", "--offline", "--lib"])
                .env("CARGO_TARGET_DIR", &target)
                .env_remove("RUSTDOCFLAGS")
                .current_dir(root)
                .status()
                .expect("cargo doc runs");
            assert!(status.success(), "cargo doc failed: {status}");
            target.join("doc")
        }
    };
    let pages = doc_item_pages(&doc.join("bankconf"));
    let (listed, count) = library_md_items();
    let unlisted: Vec<&String> = pages.iter().filter(|p| !listed.contains(p)).collect();
    let pageless: Vec<&String> = listed.iter().filter(|l| !pages.contains(l)).collect();
    assert!(
        unlisted.is_empty() && pageless.is_empty(),
        "docs/library.md \"What is public\" against cargo doc: public but not listed {unlisted:?}; listed but no item \
         page {pageless:?}"
    );
    assert_eq!(pages.len(), count, "docs/library.md says \"Exactly these {count} items\"");
}
