//! `scripts/layers.py` holds the stated layers: the tree passes it, and an upward import (a
//! module of the access layer importing the runner, a macro named through the crate root), a
//! module outside the layer folders or a second way into the sandbox makes it fail. Without python3 these are reported ignored, never ok.

use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let missing = Command::new("python3").arg("--version").output().is_err();
    let trials = [
        ("the_tree_keeps_its_layers", None),
        (
            "an_upward_import_fails",
            Some(("harness/transport/http.rs", "use crate::harness::runner;\n", "upward import")),
        ),
        (
            "a_second_way_into_the_sandbox_fails",
            Some(("harness/fixtures/tour.rs", "use crate::sandbox::Mutant;\n", "only through")),
        ),
        // A macro named through the crate root is an import of the root (the top layer).
        (
            "a_macro_through_the_crate_root_fails",
            Some(("harness/checks/widget.rs", "fn _f() { crate::cases! {} }\n", "upward import")),
        ),
        (
            "a_module_outside_the_layer_folders_fails",
            Some(("harness/loose.rs", "use crate::harness::vocab::outcome;\n", "no layer's folder")),
        ),
    ]
    .into_iter()
    .map(|(name, injected)| Trial::test(name, move || check(injected)).with_ignored_flag(missing))
    .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Runs the script over a copy of `src/` with `line` appended to `file`; expects `said` (or a
/// pass, with no injection).
fn check(injected: Option<(&str, &str, &str)>) -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let copy = std::env::temp_dir().join(format!("bankconf-layers-{}-{}", std::process::id(), rand_suffix()));
    copy_dir(&root.join("src"), &copy).map_err(|e| format!("copying src: {e}"))?;
    if let Some((file, line, _)) = injected {
        let path = copy.join(file);
        // A file that does not exist is made (a new module).
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        std::fs::write(&path, format!("{line}{text}")).map_err(|e| e.to_string())?;
    }
    let out = Command::new("python3")
        .arg(root.join("scripts/layers.py"))
        .arg("--src")
        .arg(&copy)
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&copy);
    let said = String::from_utf8_lossy(&out.stdout);
    match injected {
        None if out.status.success() => Ok(()),
        Some((_, _, expected)) if !out.status.success() && said.contains(expected) => Ok(()),
        _ => Err(format!("scripts/layers.py exited {:?}: {said}", out.status.code()).into()),
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn copy_dir(from: &Path, to: &PathBuf) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
