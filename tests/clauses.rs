//! The clause matrix (`cases/clauses.toml`) is whole: every statement has every view judged by
//! cases of the catalogue or ruled on, and `docs/checks.md` shows it as it is
//! (`BANKCONF_BLESS=1 cargo test --test clauses` rewrites the table there).

use bankconf::internal::clauses;
use std::path::Path;

#[test]
fn every_statement_has_every_view_judged_or_ruled() {
    let problems = clauses::problems(clauses::matrix());
    assert!(problems.is_empty(), "cases/clauses.toml is not whole:\n{}", problems.join("\n"));
}

#[test]
fn the_matrix_fails_on_an_empty_cell_an_unknown_case_and_an_unknown_ruling() {
    let text = r#"
        views = ["one-answer", "frontend"]
        [rulings]
        open = "left open"
        [[clause]]
        id = "a"
        section = "§1"
        says = "x"
        judged = { one-answer = ["no.such-case"] }
        [[clause]]
        id = "b"
        section = "§1"
        says = "y"
        ruled = { "*" = "@missing" }
    "#;
    let mut m: clauses::Matrix = toml::from_str(text).expect("a matrix");
    let before = clauses::problems(&m).join("\n");
    assert!(before.contains("clause a: view frontend is neither judged nor ruled"), "{before}");
    let case: bankconf::Case = toml::from_str(
        r#"
        id = "x.y"
        title = "t"
        section = "§1"
        level = "must"
        judges = ["a/frontend", "zz/one-answer", "a/nowhere"]
    "#,
    )
    .expect("a case");
    m.place(&[case]);
    let problems = clauses::problems(&m).join("\n");
    assert!(!problems.contains("clause a: view frontend is neither"), "a case's cell is placed: {problems}");
    assert!(problems.contains("case x.y judges zz/one-answer, which is no clause/view"), "{problems}");
    assert!(problems.contains("case x.y judges a/nowhere, which is no clause/view"), "{problems}");
    assert!(problems.contains("no.such-case, which is not in cases/*.toml"), "{problems}");
    assert!(problems.contains("no ruling @missing"), "{problems}");
}

const BEGIN: &str = "<!-- clauses:begin (generated from cases/clauses.toml by tests/clauses.rs) -->\n";
const END: &str = "<!-- clauses:end -->";

#[test]
fn docs_checks_shows_the_matrix_row_by_row() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/checks.md");
    let text = std::fs::read_to_string(&path).expect("docs/checks.md");
    let table = clauses::markdown(clauses::matrix());
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        panic!("docs/checks.md has no clause matrix block ({BEGIN:?} … {END:?})");
    };
    let current = &text[start + BEGIN.len()..end];
    if current != table {
        if std::env::var_os("BANKCONF_BLESS").is_some() {
            let new = format!("{}{BEGIN}{table}{}", &text[..start], &text[end..]);
            std::fs::write(&path, new).expect("write docs/checks.md");
        } else {
            panic!("docs/checks.md's clause matrix is out of date: BANKCONF_BLESS=1 cargo test --test clauses");
        }
    }
}

/// Each case a judged cell names is proven able to fail: some sandbox mutant names it among the
/// cases that catch it (`tests/mutants.rs` shows each caught). The few without one of their own
/// are listed here, each with why, so that a new one shows.
#[test]
fn every_case_a_cell_names_is_caught_by_a_mutant() {
    use bankconf::sandbox::Mutant;
    const WITHOUT: [(&str, &str); 3] = [
        ("create.id-shape", "advisory: the samples' shape is no rule (§2)"),
        ("widget.defines-open", "advisory: repeats widget.global-open's verdict where a browser runs"),
        ("lifecycle.random-sequences", "a property: the lifecycle mutants fail it beside the transition graph"),
    ];
    let m = clauses::matrix();
    let mut missing: Vec<&str> = m
        .clause
        .iter()
        .flat_map(|c| c.judged.values().flatten())
        .map(String::as_str)
        .filter(|id| !Mutant::ALL.iter().any(|mutant| mutant.caught_by().contains(id)))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    let allowed: Vec<&str> = WITHOUT.iter().map(|(id, _)| *id).collect();
    let mut allowed_sorted = allowed.clone();
    allowed_sorted.sort_unstable();
    assert_eq!(missing, allowed_sorted, "cases a cell names that no mutant catches");
}

/// Every case a run judges names a cell of the matrix it judges (its `judges`, where it is
/// defined): a case in no cell states no rule of the spec, and escapes the mutant check above.
#[test]
fn every_online_case_judges_a_cell() {
    let idle: Vec<&str> = bankconf::internal::catalogue::all()
        .iter()
        .filter(|c| !c.offline && c.judges.is_empty())
        .map(|c| c.id.as_str())
        .collect();
    assert!(idle.is_empty(), "cases in no cell of cases/clauses.toml (add `judges` to each): {idle:?}");
}
