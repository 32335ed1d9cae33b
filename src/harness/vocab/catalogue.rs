//! The case catalogue: the data in `cases/*.toml`, embedded in the binary.

use crate::harness::vocab::errors::{SelectionError, UnknownName};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

/// How much a case's failure matters (see `cases/README.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The spec states the rule.
    Must,
    /// What a bank-data API must protect, even where the spec is silent.
    Security,
    /// No 5xx for bad input.
    Robustness,
    /// An observation; never gates.
    Advisory,
}

impl Level {
    /// Every level, most important first.
    pub const ALL: [Level; 4] = [Self::Must, Self::Security, Self::Robustness, Self::Advisory];

    /// The level's name in the catalogue and on the command line (`must`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Must => "must",
            Self::Security => "security",
            Self::Robustness => "robustness",
            Self::Advisory => "advisory",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Level {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        Self::ALL.into_iter().find(|l| l.as_str() == s.trim()).ok_or_else(|| UnknownName::Level(s.to_string()))
    }
}

/// A prerequisite a case needs from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Need {
    /// A driver that moves connections through states.
    Driver,
    /// The driver registered the webhook receiver.
    Webhooks,
    /// A CONNECTED connection (made with the driver, or given with `--connection-id`).
    Connection,
    /// The key of a second client.
    SecondKey,
    /// The service name of the widget path.
    Service,
    /// A headless Chromium to run the widget script in (found on PATH or given).
    Browser,
}

/// One case of the catalogue.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// `<area>.<name>`, e.g. `transactions.walk-exactly-once`.
    pub id: String,
    /// One line: what the target must do.
    pub title: String,
    /// The spec section of the rule, e.g. `§4.3`.
    pub section: String,
    /// How much a failure matters.
    pub level: Level,
    /// What the case needs from the configuration; without it, the case is ignored.
    #[serde(default)]
    pub needs: Vec<Need>,
    /// The cells of the clause matrix (`cases/clauses.toml`) it judges, each `clause/view`
    /// (`4.3.limit/other-client`): a case names its cells where it is defined.
    #[serde(default)]
    pub judges: Vec<String>,
    /// Judged only by `bankconf check-events`, over a capture file (`cases/check-events.toml`).
    #[serde(default)]
    pub offline: bool,
    /// The area: the catalogue file the case is listed in (`transactions` for
    /// `cases/transactions.toml`), whose code is the module `checks::<area>`.
    #[serde(skip)]
    pub area: &'static str,
}

#[derive(Deserialize)]
struct CaseFile {
    case: Vec<Case>,
}

/// The catalogue files by area, in the order cases are listed.
const FILES: [(&str, &str); 13] = [
    ("connections", include_str!("../../../cases/connections.toml")),
    ("accounts", include_str!("../../../cases/accounts.toml")),
    ("transactions", include_str!("../../../cases/transactions.toml")),
    ("events", include_str!("../../../cases/events.toml")),
    ("lifecycle", include_str!("../../../cases/lifecycle.toml")),
    ("reactions", include_str!("../../../cases/reactions.toml")),
    ("security", include_str!("../../../cases/security.toml")),
    ("widget", include_str!("../../../cases/widget.toml")),
    ("robustness", include_str!("../../../cases/robustness.toml")),
    ("state", include_str!("../../../cases/state.toml")),
    ("invariants", include_str!("../../../cases/invariants.toml")),
    ("http", include_str!("../../../cases/http.toml")),
    ("check-events", include_str!("../../../cases/check-events.toml")),
];

static CATALOGUE: LazyLock<Vec<Case>> = LazyLock::new(|| {
    FILES
        .iter()
        .flat_map(|&(area, text)| {
            let file = toml::from_str::<CaseFile>(text)
                .unwrap_or_else(|e| panic!("cases/{area}.toml is not a valid catalogue file: {e}"));
            file.case.into_iter().map(move |case| Case { area, ..case })
        })
        .collect()
});

/// Every case, in catalogue order.
pub fn all() -> &'static [Case] {
    &CATALOGUE
}

/// Looks a case up by id.
pub fn find(id: &str) -> Option<&'static Case> {
    all().iter().find(|c| c.id == id)
}

/// A selection of cases: by id (exact or prefix such as `transactions.`), section or level.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Case ids or id prefixes; empty selects every case.
    pub ids: Vec<String>,
    /// Sections such as `§4.3` or `4.3` (a section selects its subsections too).
    pub sections: Vec<String>,
    pub levels: Vec<Level>,
    /// Case ids or id prefixes left out (`--exclude`), whatever else selects them.
    pub excluded: Vec<String>,
}

impl Selection {
    /// Whether `bankconf run` runs `case` (offline cases belong to `check-events`): the filter
    /// chose it and no `--exclude` leaves it out.
    pub fn matches(&self, case: &Case) -> bool {
        self.chosen(case) && self.excluded_by(case).is_none()
    }

    /// Whether the filter (ids, sections, levels) chooses `case`, whatever `--exclude` says.
    pub fn chosen(&self, case: &Case) -> bool {
        if case.offline {
            return false;
        }
        let id_ok = self.ids.is_empty() || self.ids.iter().any(|p| case.id == *p || case.id.starts_with(p.as_str()));
        let section_ok = self.sections.is_empty()
            || self.sections.iter().any(|s| {
                let want = s.trim_start_matches('§');
                let have = case.section.trim_start_matches('§');
                have == want || have.starts_with(&format!("{want}."))
            });
        let level_ok = self.levels.is_empty() || self.levels.contains(&case.level);
        id_ok && section_ok && level_ok
    }

    /// The `--exclude` pattern (the first given) that leaves out `case`, if one does.
    pub fn excluded_by(&self, case: &Case) -> Option<&str> {
        self.excluded.iter().find(|p| case.id.starts_with(p.as_str())).map(String::as_str)
    }

    /// The filter as its flags write it (`events.schema --section 4.3 --level must`); empty when
    /// it chooses every case.
    pub fn filter_words(&self) -> String {
        let sections = self.sections.iter().map(|s| format!("--section {s}"));
        let levels = self.levels.iter().map(|l| format!("--level {l}"));
        self.ids.iter().cloned().chain(sections).chain(levels).collect::<Vec<_>>().join(" ")
    }
}

/// How the reason of a case left out on purpose starts: the flag that left it out follows, in
/// parentheses (`left out on purpose (--exclude isolation.)`, `(--skip-browser)`). Such a case is
/// not run; it is ignored, so that a gating one makes the run INCOMPLETE, and every report names
/// the flag ([`left_out_by`]).
pub(crate) const LEFT_OUT: &str = "left out on purpose (";

/// The reason of a case `how` left out on purpose, with what completes the run.
pub(crate) fn left_out(how: &str) -> String {
    format!("{LEFT_OUT}{how}): not run; drop the flag to judge it, or expect it ignored in an --expect file")
}

/// The flag that left a case out on purpose, from its reason ([`LEFT_OUT`]).
pub(crate) fn left_out_by(reason: &str) -> Option<&str> {
    reason.strip_prefix(LEFT_OUT)?.split_once(')').map(|(how, _)| how)
}

/// The one rule for selection mistakes, in `bankconf run` and `run --list` alike: an id, id
/// prefix or section that names no case of `bankconf run`, or a selection that together names
/// none, is an error (exit 2) with a "did you mean". A prefix (`transaction.`) is compared with
/// the area prefixes (`transactions.`), an id with ids and prefixes.
pub fn check_selection(selection: &Selection) -> Result<(), SelectionError> {
    let runnable: Vec<&Case> = all().iter().filter(|c| !c.offline).collect();
    let ids: Vec<&str> = runnable.iter().map(|c| c.id.as_str()).collect();
    let mut prefixes: Vec<String> = Vec::new();
    for id in &ids {
        let prefix = id.split_once('.').map_or(id.to_string(), |(area, _)| format!("{area}."));
        if !prefixes.contains(&prefix) {
            prefixes.push(prefix);
        }
    }
    for wanted in selection.ids.iter().chain(&selection.excluded) {
        if ids.iter().any(|id| id.starts_with(wanted.as_str())) {
            continue;
        }
        let candidates: Vec<&str> = if wanted.ends_with('.') {
            prefixes.iter().map(String::as_str).collect()
        } else {
            prefixes.iter().map(String::as_str).chain(ids.iter().copied()).collect()
        };
        return Err(SelectionError::UnknownCase {
            wanted: wanted.clone(),
            nearest: nearest(wanted, &candidates).into(),
        });
    }
    let mut sections: Vec<&str> = Vec::new();
    for case in &runnable {
        let section = case.section.trim_start_matches('§');
        if !sections.contains(&section) {
            sections.push(section);
        }
    }
    for wanted in &selection.sections {
        let one = Selection { sections: vec![wanted.clone()], ..Default::default() };
        if runnable.iter().any(|c| one.matches(c)) {
            continue;
        }
        let bare = wanted.trim_start_matches('§');
        let (wanted, nearest) = (wanted.clone(), nearest(bare, &sections).to_string());
        return Err(match crate::spec::SECTIONS.iter().find(|(s, _)| s.trim_start_matches('§') == bare) {
            Some(&(section, title)) => SelectionError::UncheckedSection { wanted, section, title, nearest },
            None => SelectionError::UnknownSection { wanted, bare: bare.to_string(), nearest },
        });
    }
    if !runnable.iter().any(|c| selection.matches(c)) {
        return Err(SelectionError::NoCase);
    }
    Ok(())
}

/// The candidate nearest `wanted` by edit distance (the first of equals).
fn nearest<'a>(wanted: &str, candidates: &[&'a str]) -> &'a str {
    candidates.iter().min_by_key(|c| strsim::levenshtein(wanted, c)).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn catalogue_is_well_formed() {
        let mut seen = HashSet::new();
        for case in all() {
            assert!(seen.insert(&case.id), "duplicate case id {}", case.id);
            assert!(case.section.starts_with('§'), "{}: section must cite §", case.id);
            assert!(
                crate::spec::SECTIONS.iter().any(|(s, _)| *s == case.section),
                "{}: unknown section {}",
                case.id,
                case.section
            );
            assert!(
                case.id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'),
                "{}: ids are lower-case kebab words joined by dots",
                case.id
            );
        }
        assert!(all().len() >= 40, "catalogue has {} cases", all().len());
    }

    #[test]
    fn a_typo_gets_a_suggestion() {
        let typo = Selection { ids: vec!["transactions.walk-exactly-one".into()], ..Default::default() };
        let e = check_selection(&typo).unwrap_err().to_string();
        assert!(e.contains("did you mean \"transactions.walk-exactly-once\""), "{e}");
        let fine =
            Selection { ids: vec!["transactions.".into(), "create.status-created".into()], ..Default::default() };
        assert!(check_selection(&fine).is_ok());
        let prefix = Selection { ids: vec!["transaction.".into()], ..Default::default() };
        let e = check_selection(&prefix).unwrap_err().to_string();
        assert!(e.contains("did you mean \"transactions.\""), "{e}");
        let section = Selection { sections: vec!["4.9".into()], ..Default::default() };
        let e = check_selection(&section).unwrap_err().to_string();
        assert!(e.contains("no section §4.9") && e.contains("did you mean §4."), "{e}");
        let unchecked = Selection { sections: vec!["§9".into()], ..Default::default() };
        assert!(check_selection(&unchecked).unwrap_err().to_string().contains("no case of `bankconf run` checks §9"));
        let nothing = Selection { sections: vec!["4.3".into()], levels: vec![Level::Advisory], ..Default::default() };
        if !all().iter().any(|c| nothing.matches(c)) {
            assert_eq!(check_selection(&nothing), Err(SelectionError::NoCase));
        }
        assert!(check_selection(&Selection::default()).is_ok());
    }

    #[test]
    fn selection_by_prefix_section_and_level() {
        let left = Selection { excluded: vec!["transactions.walk".into()], ..Default::default() };
        assert!(all().iter().filter(|c| left.matches(c)).all(|c| !c.id.starts_with("transactions.walk")));
        assert!(all().iter().any(|c| left.matches(c) && c.id.starts_with("transactions.")));
        let typo = Selection { excluded: vec!["transactions.walkk".into()], ..Default::default() };
        assert!(check_selection(&typo).is_err(), "an exclusion that names no case is a mistake too");
        let sel = Selection { ids: vec!["transactions.".into()], ..Default::default() };
        assert!(all().iter().filter(|c| sel.matches(c)).all(|c| c.area == "transactions"));
        let sel = Selection { sections: vec!["4".into()], ..Default::default() };
        assert!(sel.matches(find("transactions.page-schema").unwrap()));
        assert!(!sel.matches(find("widget.served").unwrap()));
        let sel = Selection { levels: vec![Level::Advisory], ..Default::default() };
        assert!(all().iter().filter(|c| sel.matches(c)).all(|c| c.level == Level::Advisory));
        assert_eq!(sel.filter_words(), "--level advisory");
    }

    /// An excluded case is chosen by the filter and left out by its pattern; its reason names
    /// the flag, which the reports read back.
    #[test]
    fn an_exclusion_is_named_in_its_reason() {
        let sel = Selection {
            ids: vec!["transactions.".into()],
            excluded: vec!["transactions.walk".into()],
            ..Default::default()
        };
        let walk = all().iter().find(|c| c.id.starts_with("transactions.walk")).unwrap();
        assert!(sel.chosen(walk) && !sel.matches(walk));
        assert_eq!(sel.excluded_by(walk), Some("transactions.walk"));
        let reason = left_out("--exclude transactions.walk");
        assert_eq!(left_out_by(&reason), Some("--exclude transactions.walk"));
        assert_eq!(left_out_by("needs a driver"), None);
    }
}
