//! The generated perturbations of the sandbox ([`crate::sandbox::generated`]) judged by the
//! clause matrix (issue 49): a perturbation of a judged cell is a mutant the cell's cases must
//! catch; one of a ruled cell is a legal variant the whole catalogue must pass. Where a
//! perturbation's outcome differs from that, it is a finding, listed in
//! `docs/perturbations.md` (`tests/perturbations.rs` writes and checks it).

use crate::harness::report::EXIT_PASSED;
use crate::harness::vocab::clauses::{self, Cell};
use crate::sandbox::{generated, Perturbation, Variant};
use crate::selftest::{self, Subject};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// What the matrix expects of a perturbation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A judged cell: one of these cases must fail.
    Mutant(Vec<String>),
    /// A ruled cell: nothing may fail (the ruling's text).
    Legal(String),
    /// The matrix has no clause or only a gap there: not judged, and why.
    Unjudged(String),
}

/// One generated perturbation and what the matrix expects of it.
#[derive(Clone, Debug)]
pub struct Item {
    pub perturbation: &'static Perturbation,
    pub expect: Expect,
}

impl Item {
    pub fn name(&self) -> &'static str {
        &self.perturbation.name
    }

    /// `clause / view`.
    pub fn cell(&self) -> String {
        format!("{} / {}", self.perturbation.clause, self.perturbation.view)
    }
}

/// Every generated perturbation with its expectation, in the generator's order.
pub fn items() -> Vec<Item> {
    let m = clauses::matrix();
    generated()
        .perturbations
        .iter()
        .map(|p| {
            let clause = m.clause.iter().find(|c| c.id == p.clause);
            let expect = match clause.and_then(|c| m.cell_part(c, p.view, p.family.part())) {
                Some(Cell::Judged(cases)) => Expect::Mutant(cases),
                Some(Cell::Ruled(why)) => Expect::Legal(why),
                Some(Cell::Gap(why)) => Expect::Unjudged(format!("a gap of the matrix: {why}")),
                None => Expect::Unjudged(format!("cases/clauses.toml has no cell {} / {}", p.clause, p.view)),
            };
            Item { perturbation: p, expect }
        })
        .collect()
}

/// The lines `bankconf serve --list-mutants` adds: each perturbation with its cell and what it
/// is, then each family that does not apply and why. Every line is indented, so that the
/// scripts reading the hand-written mutants' rows (a name at the start of a line) skip them.
pub fn listing() -> String {
    let mut out = String::from("  generated perturbations (issue 49; the clause matrix decides mutant or legal):\n");
    for item in items() {
        let what = match &item.expect {
            Expect::Mutant(cases) => format!("mutant for one of: {}", cases.join(", ")),
            Expect::Legal(_) => "legal variant".to_string(),
            Expect::Unjudged(why) => format!("not judged: {why}"),
        };
        let seed = if item.perturbation.seeded { "  flags: seed" } else { "" };
        let _ = writeln!(out, "  {:<44} {:<36} {what}{seed}", item.name(), item.cell());
    }
    out.push_str("  families that do not apply:\n");
    for n in &generated().not_applicable {
        let at = if n.field.is_empty() { n.site.name().to_string() } else { format!("{}.{}", n.site.name(), n.field) };
        let _ = writeln!(out, "  {:<44} {:<20} {}", at, n.family.name(), n.why);
    }
    out
}

/// What one run against perturbations showed.
#[derive(Clone, Debug)]
pub struct Run {
    pub exit_code: i32,
    /// Ids of the failed cases, each with its message's first line.
    pub failed: Vec<(String, String)>,
    pub error: Option<String>,
    /// Cases left unjudged, each group with why.
    pub unjudged: Vec<String>,
}

/// Runs `ids` of the catalogue (empty: all) against the sandbox with `names` applied.
pub async fn run(ids: Vec<String>, names: Vec<String>, event_timeout: f64, seed: u64) -> Run {
    let config = selftest::perturbed_config(ids, names, event_timeout, seed);
    // The subject only names the trial; its exit code and failures are what is read here.
    let trial = selftest::trial_with(config, Subject::Variant(Variant::ALL[0])).await;
    let failed = trial
        .failed
        .iter()
        .map(|(id, f)| (id.clone(), f.to_string().lines().next().unwrap_or_default().chars().take(160).collect()))
        .collect();
    Run { exit_code: trial.exit_code, failed, error: trial.error, unjudged: trial.unjudged }
}

/// A mutant's verdict: CAUGHT when one of `cases` failed (an advisory case fails and leaves
/// the run green, as in the self-test), else MISSED.
pub fn mutant_verdict(run: &Run, cases: &[String]) -> &'static str {
    if run.failed.iter().any(|(id, _)| cases.contains(id)) {
        "CAUGHT"
    } else {
        "MISSED"
    }
}

/// A legal variant's verdict: PASSED when the run passed, else FALSE.
pub fn legal_verdict(run: &Run) -> &'static str {
    if run.exit_code == EXIT_PASSED {
        "PASSED"
    } else {
        "FALSE"
    }
}

/// The legal variants in batches that cannot mask each other: at most one edit per field of a
/// site in a batch (two edits of one field would overwrite each other).
pub fn legal_batches(items: &[Item]) -> Vec<Vec<Item>> {
    let mut batches: Vec<(BTreeSet<String>, Vec<Item>)> = Vec::new();
    for item in items.iter().filter(|i| matches!(i.expect, Expect::Legal(_))) {
        let p = item.perturbation;
        let key = format!("{}.{}", p.site.name(), p.field);
        match batches.iter_mut().find(|(keys, _)| !keys.contains(&key)) {
            Some((keys, batch)) => {
                keys.insert(key);
                batch.push(item.clone());
            }
            None => batches.push((BTreeSet::from([key]), vec![item.clone()])),
        }
    }
    batches.into_iter().map(|(_, b)| b).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_family_names_a_part_of_the_matrix() {
        for family in crate::sandbox::Family::ALL {
            assert!(crate::harness::vocab::clauses::PARTS.contains(&family.name()), "{}", family.name());
        }
    }
}
