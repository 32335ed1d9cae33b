//! A root of the run's verdict, as every report renders it (`runner::causes` finds them).

/// A root of the verdict, said once, before the failures it explains: a failed case that is no
/// other's consequence, with its consequences, or a fact of the whole run that may explain
/// several failures (`runner::causes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootCause {
    /// The case whose failure is the root, when one is (a fact of the answers, such as bodies
    /// that are not JSON, is said with the cases that show it and may have none).
    pub case: Option<String>,
    /// What was observed, with its counts and the section it breaks.
    pub cause: String,
    /// The cases that are its consequences (a case of their own: their outcome follows from
    /// it, [`crate::harness::vocab::outcome::CaseResult::consequence_of`]), or for a fact of
    /// the answers, the failed cases whose evidence shows it.
    pub cases: Vec<String>,
}

impl RootCause {
    /// Whether it explains other cases: the reports that say one cause before its failures
    /// show these; the JSON report lists every root.
    pub fn explains(&self) -> bool {
        !self.cases.is_empty()
    }
}
