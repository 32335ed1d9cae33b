//! What a case concludes.

use std::fmt;

/// The outcome of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
    /// Not run, with the reason (a missing prerequisite, or an action the target cannot do).
    Ignored(String),
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed(_) => "failed",
            Self::Ignored(_) => "ignored",
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Passed => None,
            Self::Failed(m) | Self::Ignored(m) => Some(m),
        }
    }
}

/// Why a check stopped before passing; checks return `Result<(), Stop>` and use `?`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    Fail(String),
    Ignore(String),
}

impl Stop {
    pub fn fail(message: impl Into<String>) -> Self {
        Self::Fail(message.into())
    }

    pub fn ignore(reason: impl Into<String>) -> Self {
        Self::Ignore(reason.into())
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fail(m) | Self::Ignore(m) => f.write_str(m),
        }
    }
}

impl From<Result<(), Stop>> for Outcome {
    fn from(result: Result<(), Stop>) -> Self {
        match result {
            Ok(()) => Self::Passed,
            Err(Stop::Fail(m)) => Self::Failed(m),
            Err(Stop::Ignore(m)) => Self::Ignored(m),
        }
    }
}

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Stop> {
    if condition {
        Ok(())
    } else {
        Err(Stop::Fail(message()))
    }
}
