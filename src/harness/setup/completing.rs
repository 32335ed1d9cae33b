//! Value parsers that offer their names to shell completion (`bankconf completions`): case
//! ids, levels, mutants and variants complete, while each value is still parsed as before (a
//! case argument may be any id prefix, so it is never refused here).

use crate::harness::embedded::{Mutant, Variant};
use crate::harness::vocab::errors::UnknownName;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use std::ffi::OsStr;

/// Parses with `parse`; completes with `names`.
#[derive(Clone, Copy)]
pub struct Completing<T> {
    names: fn() -> Vec<&'static str>,
    parse: fn(&str) -> Result<T, String>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Completing<T> {
    type Value = T;

    fn parse_ref(&self, _: &clap::Command, _: Option<&clap::Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let text = value.to_str().ok_or_else(|| clap::Error::raw(ErrorKind::InvalidUtf8, "not UTF-8\n"))?;
        (self.parse)(text).map_err(|e| clap::Error::raw(ErrorKind::InvalidValue, format!("{e}\n")))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.names)().into_iter().map(PossibleValue::new)))
    }
}

/// A case id or id prefix (`transactions.`): the catalogue's ids complete.
pub fn case_ids() -> Completing<String> {
    let names = || crate::harness::vocab::catalogue::all().iter().map(|c| c.id.as_str()).collect();
    Completing { names, parse: |s| Ok(s.to_string()) }
}

/// A level (`must`, `security`, ...).
pub fn levels() -> Completing<crate::harness::vocab::catalogue::Level> {
    use crate::harness::vocab::catalogue::Level;
    Completing {
        names: || Level::ALL.iter().map(|l| l.as_str()).collect(),
        parse: |s| s.parse().map_err(|e| format!("{e}")),
    }
}

/// `--sandbox-mutant NAME` and `bankconf serve --mutant NAME`.
pub fn parse_mutant(name: &str) -> Result<Mutant, UnknownName> {
    Mutant::from_name(name).ok_or_else(|| UnknownName::Mutant(name.to_string()))
}

/// `--sandbox-variant NAME` and `bankconf serve --variant NAME`.
pub fn parse_variant(name: &str) -> Result<Variant, UnknownName> {
    Variant::from_name(name).ok_or_else(|| UnknownName::Variant(name.to_string()))
}

/// A mutant of the sandbox (`bankconf serve --list-mutants`).
pub fn mutants() -> Completing<Mutant> {
    let parse = |s: &str| parse_mutant(s).map_err(|e| format!("{e}"));
    Completing { names: || Mutant::ALL.iter().map(|m| m.name()).collect(), parse }
}

/// A variant of the sandbox (`bankconf serve --list-variants`).
pub fn variants() -> Completing<Variant> {
    let parse = |s: &str| parse_variant(s).map_err(|e| format!("{e}"));
    Completing { names: || Variant::ALL.iter().map(|v| v.name()).collect(), parse }
}
