//! `bankconf.toml`: the settings of `bankconf run` in a file, with named profiles (as
//! Schemathesis's `schemathesis.toml` and nextest's `.config/nextest.toml`), so that a CI job
//! and a developer's shell share them instead of repeating flags.
//!
//! Each key is a flag's long name (`base-url`, `driver`, `gate`, `skip-browser`, `exclude`…;
//! `case` for the CASE ids); `[profile.NAME]` tables override the top-level keys for
//! `--profile NAME`. Flags and `BANKCONF_*` variables override the file, and the file the
//! defaults: default < file < profile < environment < flag. Keys stay out of the file: it names
//! the variables that hold them (`api-key-env = "STAGING_KEY"`, `second-api-key-env`,
//! `header-env` for `--header` lines, whose values are secrets too).
//!
//! The file's settings become flags placed before the command line's (only for the settings
//! neither a flag nor a variable gives), and the whole is parsed again: one parser, so a value
//! in the file is checked exactly as the same flag is.

use crate::harness::setup::config::RunConfig;
use crate::harness::vocab::errors::ConfigFileError;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

/// The file `bankconf run` reads from its working directory when no `--config` is given.
pub const DEFAULT_FILE: &str = "bankconf.toml";

/// Which settings file and profile `bankconf run` reads, and `--print-config`: flags of the
/// front door, not settings of the run (the file cannot set them).
#[derive(Args, Clone, Debug, Default)]
pub struct ConfigChoice {
    /// The settings file (TOML, docs/running.md "Settings file and profiles"); default: ./bankconf.toml
    /// when it exists. Flags and BANKCONF_* variables override it.
    #[arg(long = "config", env = "BANKCONF_CONFIG", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The profile of the file to use (its `[profile.NAME]` table, over its top-level settings).
    #[arg(long, env = "BANKCONF_PROFILE", value_name = "NAME")]
    pub profile: Option<String>,
    /// Print the settings the run would use, each with where it comes from (default, file,
    /// profile, env, flag; secrets redacted), and exit.
    #[arg(long)]
    pub print_config: bool,
}

/// The keys that name the variable holding a secret, and the flag each fills.
const SECRET_VARIABLES: [(&str, &str); 3] =
    [("api-key-env", "api-key"), ("second-api-key-env", "second-api-key"), ("header-env", "header")];

/// A settings file read and checked: its top-level settings and the chosen profile's.
#[derive(Debug)]
pub struct ConfigFile {
    /// The file, as given or found.
    pub file: String,
    base: toml::Table,
    profile: Option<(String, toml::Table)>,
}

/// The flags a settings file adds to a command line, and where each setting came from.
#[derive(Debug, Default)]
pub struct FromFile {
    /// Flags and values, to place before the command line's own.
    pub args: Vec<OsString>,
    /// CASE ids, to place after the command line's own (which then gives none).
    pub cases: Vec<OsString>,
    /// Per argument id of [`RunConfig`], where its value came from (`file bankconf.toml`,
    /// `profile ci (bankconf.toml)`).
    pub origins: BTreeMap<String, String>,
}

/// The `run` command's arguments, as clap knows them.
fn run_command() -> clap::Command {
    let mut command = RunConfig::augment_args(clap::Command::new("run"));
    command.build();
    command
}

/// The argument a key sets: a flag's long name, or `case` for the CASE ids.
fn argument(command: &clap::Command, key: &str) -> Option<clap::Arg> {
    command.get_arguments().find(|a| a.get_long() == Some(key) || (key == "case" && a.is_positional())).cloned()
}

impl ConfigFile {
    /// The settings file `choice` names, or `./bankconf.toml` when there is one; `None` when
    /// neither (and no profile is asked for). Every table is checked, the unused profiles too.
    pub fn load(choice: &ConfigChoice) -> Result<Option<Self>, ConfigFileError> {
        let path = match &choice.file {
            Some(path) => path.clone(),
            None if std::path::Path::new(DEFAULT_FILE).is_file() => PathBuf::from(DEFAULT_FILE),
            None => match &choice.profile {
                Some(profile) => return Err(ConfigFileError::ProfileWithoutFile { profile: profile.clone() }),
                None => return Ok(None),
            },
        };
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Read { file: file.clone(), source })?;
        let mut base: toml::Table =
            toml::from_str(&text).map_err(|e| ConfigFileError::Parse { file: file.clone(), message: e.to_string() })?;
        let profiles = match base.remove("profile") {
            None => toml::Table::new(),
            Some(toml::Value::Table(profiles)) => profiles,
            Some(_) => return Err(ConfigFileError::value(&file, "profile", "a table of [profile.NAME] tables")),
        };
        check(&file, &base)?;
        let mut tables = BTreeMap::new();
        for (name, table) in profiles {
            let toml::Value::Table(table) = table else {
                return Err(ConfigFileError::value(&file, &format!("profile.{name}"), "a table of settings"));
            };
            check(&file, &table)?;
            tables.insert(name, table);
        }
        let profile = match &choice.profile {
            None => None,
            Some(name) => match tables.remove(name) {
                Some(table) => Some((name.clone(), table)),
                None => {
                    let known = tables.keys().cloned().collect::<Vec<_>>().join(", ");
                    return Err(ConfigFileError::NoProfile { file, profile: name.clone(), known });
                }
            },
        };
        Ok(Some(Self { file, base, profile }))
    }

    /// The file and the profile, as `--print-config` names them.
    pub fn describe(&self) -> String {
        match &self.profile {
            Some((name, _)) => format!("{}, profile {name}", self.file),
            None => self.file.clone(),
        }
    }

    /// The flags this file adds to the `run` command line parsed into `given`: for each setting
    /// (the profile's over the top level's) that neither a flag nor a variable gives. A
    /// `*-env` key reads its variable now (unset: an error naming it).
    pub fn args_for(&self, given: &ArgMatches) -> Result<FromFile, ConfigFileError> {
        let command = run_command();
        let mut merged: BTreeMap<&str, (&toml::Value, String)> = BTreeMap::new();
        let file_origin = format!("file {}", self.file);
        for (key, value) in &self.base {
            merged.insert(key, (value, file_origin.clone()));
        }
        if let Some((name, table)) = &self.profile {
            for (key, value) in table {
                merged.insert(key, (value, format!("profile {name} ({})", self.file)));
            }
        }
        let mut from = FromFile::default();
        for (key, (value, origin)) in merged {
            let target = SECRET_VARIABLES.iter().find(|(k, _)| *k == key).map_or(key, |(_, flag)| flag);
            let arg = argument(&command, target).ok_or_else(|| unknown(&self.file, key))?;
            let id = arg.get_id().as_str();
            if matches!(given.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable)) {
                continue;
            }
            let mut values = scalars(&self.file, key, value, &arg)?;
            let origin = match target != key {
                true => format!("{origin}, {key} = {}", values.join(", ")),
                false => origin,
            };
            if target != key {
                values = secrets(&self.file, key, &values)?;
            }
            from.origins.insert(id.to_string(), origin);
            if arg.is_positional() {
                from.cases.extend(values.into_iter().map(OsString::from));
                continue;
            }
            let flag = format!("--{target}");
            if !arg.get_action().takes_values() {
                // A switch: `true` gives it, `false` leaves the default (off).
                if !value.is_bool() {
                    return Err(ConfigFileError::value(&self.file, key, "true or false"));
                }
                if values.iter().any(|v| v == "true") {
                    from.args.push(flag.into());
                }
                continue;
            }
            for v in values {
                from.args.extend([OsString::from(&flag), OsString::from(v)]);
            }
        }
        Ok(from)
    }
}

/// A key that names no setting, with the nearest that does.
fn unknown(file: &str, key: &str) -> ConfigFileError {
    let command = run_command();
    let flags = command.get_arguments().filter(|a| !a.is_hide_set()).filter_map(|a| a.get_long());
    let names: Vec<&str> = flags.chain(SECRET_VARIABLES.iter().map(|(k, _)| *k)).chain(["case"]).collect();
    let nearest = names.iter().min_by_key(|n| strsim::levenshtein(key, n));
    let nearest = nearest.map(|n| format!("; did you mean {n:?}?")).unwrap_or_default();
    ConfigFileError::UnknownKey { file: file.into(), key: key.into(), nearest }
}

/// Every key of `table` names a setting of `run`, and no key holds a secret.
fn check(file: &str, table: &toml::Table) -> Result<(), ConfigFileError> {
    let command = run_command();
    for key in table.keys() {
        if ["api-key", "second-api-key", "header"].contains(&key.as_str()) {
            return Err(ConfigFileError::Secret { file: file.to_string(), key: key.clone() });
        }
        let known = SECRET_VARIABLES.iter().any(|(k, _)| k == key) || argument(&command, key).is_some();
        let hidden = argument(&command, key).is_some_and(|a| a.is_hide_set() && !a.is_positional());
        if !known || hidden {
            return Err(unknown(file, key));
        }
    }
    Ok(())
}

/// A setting's value as the strings its flag takes: a string, number or boolean, or an array
/// of them for a flag given several times.
fn scalars(file: &str, key: &str, value: &toml::Value, arg: &clap::Arg) -> Result<Vec<String>, ConfigFileError> {
    let one = |v: &toml::Value| match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err(ConfigFileError::value(file, key, "a string, a number or a boolean")),
    };
    let many = matches!(arg.get_action(), clap::ArgAction::Append);
    match value {
        toml::Value::Array(items) if many => items.iter().map(one).collect(),
        toml::Value::Array(_) => Err(ConfigFileError::value(file, key, "one value (this flag is given once)")),
        v => Ok(vec![one(v)?]),
    }
}

/// The values of the variables a `*-env` key names (a `header-env` variable may hold several
/// header lines, one per line).
fn secrets(file: &str, key: &str, names: &[String]) -> Result<Vec<String>, ConfigFileError> {
    let mut values = Vec::new();
    for name in names {
        let value = std::env::var(name).ok().filter(|v| !v.is_empty()).ok_or_else(|| {
            ConfigFileError::UnsetVariable { file: file.to_string(), key: key.to_string(), variable: name.clone() }
        })?;
        match key {
            "header-env" => values.extend(value.lines().filter(|l| !l.trim().is_empty()).map(str::to_string)),
            _ => values.push(value),
        }
    }
    Ok(values)
}

/// `--print-config`: one line per setting of `run`, `key = value  # where from`, as a
/// `bankconf.toml` would write it; secrets redacted (keys wholly, headers but their names).
pub fn print_config(matches: &ArgMatches, from: &FromFile) -> String {
    let command = run_command();
    let mut out = String::new();
    let settings = command.get_arguments().filter(|a| !a.is_hide_set());
    let settings = settings.filter(|a| !matches!(a.get_action(), clap::ArgAction::Help | clap::ArgAction::Version));
    for arg in settings {
        let id = arg.get_id().as_str();
        let key = if arg.is_positional() { "case".to_string() } else { arg.get_long().unwrap_or(id).to_string() };
        let values: Vec<String> =
            matches.get_raw(id).map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect()).unwrap_or_default();
        let source = match matches.value_source(id) {
            Some(ValueSource::CommandLine) => from.origins.get(id).cloned().unwrap_or_else(|| "flag".into()),
            Some(ValueSource::EnvVariable) => {
                format!("env {}", arg.get_env().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default())
            }
            Some(ValueSource::DefaultValue) => "default".into(),
            _ => "unset".into(),
        };
        let shown: Vec<String> = values
            .iter()
            .map(|v| match key.as_str() {
                "api-key" | "second-api-key" => "[redacted]".to_string(),
                // The name alone; a line with no name is all value.
                "header" => v.split_once(':').map_or("[redacted]".into(), |(n, _)| format!("{}: [redacted]", n.trim())),
                _ => v.clone(),
            })
            .collect();
        let value = match (shown.as_slice(), arg.get_action().takes_values()) {
            ([], _) => "(none)".to_string(),
            ([one], _) if !matches!(arg.get_action(), clap::ArgAction::Append) => quoted(one),
            (many, true) => format!("[{}]", many.iter().map(|v| quoted(v)).collect::<Vec<_>>().join(", ")),
            (_, false) => "true".into(),
        };
        let value = if !arg.get_action().takes_values() { matches.get_flag(id).to_string() } else { value };
        out += &format!("{:<36} # {source}\n", format!("{key} = {value}"));
    }
    out
}

/// A value as TOML writes it: numbers and booleans bare, the rest a quoted string.
fn quoted(v: &str) -> String {
    if v.parse::<f64>().is_ok() || v == "true" || v == "false" {
        v.to_string()
    } else {
        toml::Value::String(v.to_string()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--print-config` never shows a key or a header's value, even a header line with no name.
    #[test]
    fn print_config_redacts_every_secret() {
        let argv = ["run", "--api-key", "k-secret-1", "--header", "X-A: h-secret-2", "--header", "h-secret-3"];
        let matches = run_command().try_get_matches_from(argv).unwrap();
        let printed = print_config(&matches, &FromFile::default());
        for secret in ["k-secret-1", "h-secret-2", "h-secret-3"] {
            assert!(!printed.contains(secret), "{secret} printed:\n{printed}");
        }
        assert!(printed.contains("header = [\"X-A: [redacted]\", \"[redacted]\"]"), "{printed}");
        assert!(printed.contains("cases = 6") && printed.contains("# default"), "{printed}");
    }
}
