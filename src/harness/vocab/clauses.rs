//! The clause matrix, `cases/clauses.toml` (issue 39): every statement of the spec against
//! every view that can show it hold or break, each cell judged by cases of the catalogue or
//! ruled on in one line. [`problems`] says where it is not whole (`tests/clauses.rs` fails on
//! it); [`markdown`] is its table for `docs/checks.md`.

use crate::harness::vocab::catalogue;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// One statement of the spec and its cells.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clause {
    /// Stable id: the section and a short name (`2.2.currency`).
    pub id: String,
    pub section: String,
    /// What it states, paraphrased in a few words.
    pub says: String,
    /// View → the cases that judge the statement from it: placed from each case's `judges`
    /// ([`Matrix::place`]), never written in `cases/clauses.toml`.
    #[serde(default)]
    pub judged: BTreeMap<String, Vec<String>>,
    /// View (or `*`, every view not named otherwise) → why it cannot judge the statement
    /// (`@name`: a ruling of the `[rulings]` table).
    #[serde(default)]
    pub ruled: BTreeMap<String, String>,
    /// View → what a case would judge there and none does yet (an honest empty cell).
    #[serde(default)]
    pub gap: BTreeMap<String, String>,
}

/// The whole matrix.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub views: Vec<String>,
    pub rulings: BTreeMap<String, String>,
    pub clause: Vec<Clause>,
    /// The cells cases name that the matrix lacks (an unknown clause or view), as problems.
    #[serde(skip)]
    pub unplaced: Vec<String>,
}

/// How a cell is covered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cell {
    Judged(Vec<String>),
    Ruled(String),
    Gap(String),
}

static MATRIX: LazyLock<Matrix> = LazyLock::new(|| {
    let mut m: Matrix = toml::from_str(include_str!("../../../cases/clauses.toml"))
        .unwrap_or_else(|e| panic!("cases/clauses.toml is not a valid clause matrix: {e}"));
    m.place(catalogue::all());
    m
});

/// The matrix of `cases/clauses.toml`, each cell judged by the cases that name it.
pub fn matrix() -> &'static Matrix {
    &MATRIX
}

impl Matrix {
    /// Places each of `cases` in the cells its `judges` names, in catalogue order; a cell the
    /// matrix lacks is kept in [`Matrix::unplaced`].
    pub fn place(&mut self, cases: &[catalogue::Case]) {
        for case in cases {
            for cell in &case.judges {
                // `clause/view`, or `clause/view/part` for one part of a split cell.
                let (id, view) = cell.split_once('/').unwrap_or((cell, ""));
                let clause = self.clause.iter_mut().find(|c| c.id == id);
                match clause {
                    Some(clause) if view != "*" && known_view(&self.views, view) => {
                        clause.judged.entry(view.to_string()).or_default().push(case.id.clone())
                    }
                    _ => self
                        .unplaced
                        .push(format!("case {} judges {cell}, which is no clause/view of cases/clauses.toml", case.id)),
                }
            }
        }
    }

    /// The cell of `clause` in `view`: judged, gap or ruled (in that order), else `*`'s ruling.
    pub fn cell(&self, clause: &Clause, view: &str) -> Option<Cell> {
        if let Some(cases) = clause.judged.get(view) {
            return Some(Cell::Judged(cases.clone()));
        }
        if let Some(gap) = clause.gap.get(view) {
            return Some(Cell::Gap(gap.clone()));
        }
        let ruling = clause.ruled.get(view).or_else(|| clause.ruled.get("*"))?;
        Some(Cell::Ruled(self.ruling(ruling).to_string()))
    }

    /// The cell of `clause` for one `part` of `view` (a direction and size of a difference,
    /// [`PARTS`]): a key `view/part` where the clause splits the cell, else the whole cell.
    pub fn cell_part(&self, clause: &Clause, view: &str, part: Option<&str>) -> Option<Cell> {
        let key = part.map(|p| format!("{view}/{p}"));
        let split = key
            .as_ref()
            .filter(|k| clause.judged.contains_key(*k) || clause.gap.contains_key(*k) || clause.ruled.contains_key(*k));
        match split {
            Some(k) => self.cell(clause, k),
            None => self.cell(clause, view),
        }
    }

    /// A ruling's text (`@name` looked up in `[rulings]`).
    fn ruling<'a>(&'a self, text: &'a str) -> &'a str {
        text.strip_prefix('@').and_then(|name| self.rulings.get(name)).map_or(text, String::as_str)
    }

    /// (statements, cells judged, cells ruled, gaps).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let mut counts = (self.clause.len(), 0, 0, 0);
        for clause in &self.clause {
            for view in &self.views {
                match self.cell(clause, view) {
                    Some(Cell::Judged(_)) => counts.1 += 1,
                    Some(Cell::Ruled(_)) => counts.2 += 1,
                    Some(Cell::Gap(_)) => counts.3 += 1,
                    None => {}
                }
            }
        }
        counts
    }
}

/// The parts a cell may be split into (`view/part`): a ruling covers exactly what is open,
/// often one direction, one size or one kind of a difference. They are the names of the
/// generated perturbations' families (`bankconf::sandbox::Family`), which the generator checks.
pub(crate) const PARTS: [&str; 20] = [
    "earlier-1s",
    "later-1s",
    "earlier-400d",
    "later-400d",
    "sibling-id",
    "other-parent-id",
    "other-client-id",
    "sibling-value",
    "one-view-only",
    "one-read-only",
    "second-client-only",
    "missing-event",
    "extra-event",
    "missing-object",
    "extra-object",
    "refused-creates",
    "wrapped",
    "renamed",
    "retyped",
    "wrapped-body",
];

/// Whether `key` names a view of `m`, or a part of one.
fn known_view(views: &[String], key: &str) -> bool {
    match key.split_once('/') {
        Some((view, part)) => views.iter().any(|v| v == view) && PARTS.contains(&part),
        None => key == "*" || views.iter().any(|v| v == key),
    }
}

/// Where the matrix is not whole: a view neither judged nor ruled (nor a named gap), an
/// unknown view, a case that is not in the catalogue, a cell a case names that is not in it, a `@ruling` that does not exist, a view
/// both judged and ruled, a repeated clause id.
pub fn problems(m: &Matrix) -> Vec<String> {
    let mut out = m.unplaced.clone();
    let mut ids = std::collections::HashSet::new();
    for clause in &m.clause {
        let c = &clause.id;
        if !ids.insert(c.as_str()) {
            out.push(format!("clause {c} is listed twice"));
        }
        let named = clause.judged.keys().chain(clause.ruled.keys()).chain(clause.gap.keys());
        for view in named.filter(|v| !known_view(&m.views, v)) {
            out.push(format!("clause {c}: unknown view {view}"));
        }
        for view in &m.views {
            let ways =
                [clause.judged.contains_key(view), clause.ruled.contains_key(view), clause.gap.contains_key(view)];
            if ways.iter().filter(|w| **w).count() > 1 {
                out.push(format!("clause {c}: view {view} is given more than one way"));
            }
            if m.cell(clause, view).is_none() {
                out.push(format!("clause {c}: view {view} is neither judged nor ruled"));
            }
        }
        let parts = clause.judged.keys().chain(clause.ruled.keys()).chain(clause.gap.keys());
        let parts: Vec<&String> = parts.filter(|k| k.contains('/')).collect();
        for (i, part) in parts.iter().enumerate() {
            if parts[..i].contains(part) {
                out.push(format!("clause {c}: part {part} is given more than one way"));
            }
        }
        for (view, cases) in &clause.judged {
            if cases.is_empty() {
                out.push(format!("clause {c}: view {view} is judged by no case"));
            }
            for case in cases.iter().filter(|id| catalogue::find(id).is_none()) {
                out.push(format!("clause {c}: view {view} names {case}, which is not in cases/*.toml"));
            }
        }
        for ruling in clause.ruled.values().filter_map(|r| r.strip_prefix('@')) {
            if !m.rulings.contains_key(ruling) {
                out.push(format!("clause {c}: no ruling @{ruling} in [rulings]"));
            }
        }
    }
    out
}

/// The matrix as Markdown, row by row: per statement, the cases of each judged view, then its
/// gaps; the counts first. The rulings are in `cases/clauses.toml`.
pub fn markdown(m: &Matrix) -> String {
    let (statements, judged, ruled, gaps) = m.counts();
    let mut out = format!(
        "{statements} statements × {} views: {judged} cells judged, {ruled} ruled (the spec leaves it open, or the \
         view does not carry the statement), {gaps} gaps.\n\n| clause | section | statement | judged from (view: cases) | gap |\n|---|---|---|---|---|\n",
        m.views.len()
    );
    for clause in &m.clause {
        let judged: Vec<String> = m
            .views
            .iter()
            .filter_map(|v| match m.cell(clause, v) {
                Some(Cell::Judged(cases)) => {
                    Some(format!("{v}: {}", cases.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")))
                }
                _ => None,
            })
            .collect();
        let gaps: Vec<String> = clause.gap.iter().map(|(v, why)| format!("{v}: {why}")).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            clause.id,
            clause.section,
            clause.says.replace('|', "\\|"),
            if judged.is_empty() { "(ruled in every view)".to_string() } else { judged.join("; ") },
            gaps.join("; ").replace('|', "\\|")
        );
    }
    out
}
