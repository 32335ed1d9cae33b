//! A note on a run, as a value (issue 74): each report renders it late and decides where it
//! goes by its variant, never by reading back words the harness wrote.

use std::fmt;

/// One note of a run's report: what the run could not judge, what it set aside, what the
/// setup left unchecked. The reports list them; a few variants each report also places
/// elsewhere (the TLS banner by the verdict, a diagnosis shown with the cases it ended).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// Certificate verification was off (`--insecure`): the target's identity was not checked.
    /// Said where the verdict is, not only among the notes (the HTML report's banner).
    Unverified,
    /// The preflight's diagnosis that no webhook delivery reaches the receiver: the event cases
    /// that ended on it carry it as their error, so the terminal shows it once, with them.
    Silent(String),
    /// Any other fact of the run, said as is.
    Said(String),
}

impl Note {
    /// Whether it warns that the target's identity was not checked (a banner by the verdict).
    pub fn unverified(&self) -> bool {
        matches!(self, Self::Unverified)
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unverified => {
                f.write_str("TLS: certificate verification was off (--insecure): the target's identity was not checked")
            }
            Self::Silent(text) | Self::Said(text) => f.write_str(text),
        }
    }
}

impl From<String> for Note {
    fn from(text: String) -> Self {
        Self::Said(text)
    }
}

impl From<&str> for Note {
    fn from(text: &str) -> Self {
        Self::Said(text.to_string())
    }
}
