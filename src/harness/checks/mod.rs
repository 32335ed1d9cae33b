//! The code of every case. Each `cases/<area>.toml` has exactly one `checks/<area>.rs`, which
//! declares its own id → function table with [`cases!`](crate::cases); this module only
//! assembles the tables. A check is an `async fn(Arc<RunContext>) -> Result<(), Stop>`.

mod accounts;
mod connections;
mod events;
mod lifecycle;
mod reactions;
mod robustness;
mod security;
mod transactions;
mod widget;

use super::fixtures::CheckFn;

/// Declares the cases a checks file codes: `cases! { "area.what" => function, … }`.
#[macro_export]
macro_rules! cases {
    ($($id:literal => $check:path,)*) => {
        /// The cases of this file: id → code.
        pub(super) const CASES: &[(&str, $crate::harness::fixtures::CheckFn)] =
            &[$(($id, |ctx| Box::pin($check(ctx))),)*];
    };
}

/// Every checks file, named by its area (the catalogue file `cases/<area>.toml`).
pub const AREAS: [(&str, &[(&str, CheckFn)]); 9] = [
    ("connections", connections::CASES),
    ("accounts", accounts::CASES),
    ("transactions", transactions::CASES),
    ("events", events::CASES),
    ("lifecycle", lifecycle::CASES),
    ("reactions", reactions::CASES),
    ("security", security::CASES),
    ("widget", widget::CASES),
    ("robustness", robustness::CASES),
];

/// The code of the case `id`.
pub fn code_of(id: &str) -> Option<CheckFn> {
    AREAS.iter().flat_map(|(_, cases)| cases.iter()).find(|(case, _)| *case == id).map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::catalogue;

    /// A case is one place: its entry in `cases/<area>.toml` and its code in `checks/<area>.rs`.
    #[test]
    fn every_case_has_code_in_the_file_of_its_area_and_every_check_a_case() {
        for case in catalogue::all().iter().filter(|c| !c.offline) {
            let area = AREAS.iter().find(|(a, _)| *a == case.area);
            let coded = area.is_some_and(|(_, cases)| cases.iter().any(|(id, _)| *id == case.id));
            assert!(coded, "case {} of cases/{}.toml has no code in checks/{}.rs", case.id, case.area, case.area);
        }
        for (area, cases) in AREAS {
            for (id, _) in cases {
                let case = catalogue::find(id).unwrap_or_else(|| panic!("check {id} has no entry in cases/"));
                assert_eq!(
                    case.area, area,
                    "check {id} is coded in checks/{area}.rs but listed in cases/{}.toml",
                    case.area
                );
            }
        }
    }
}
