//! The transition graph a target reveals (§3.1, §3.2 show only creation): from each state the
//! run reached, what each driver action did. Judged nowhere by itself (which transitions exist is
//! not shown); reported, because it is what an implementer wants to see.

use crate::spec::{Action, ConnectionState};

/// What the target did with an action from a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transition {
    /// Accepted; the state announced afterwards.
    Accepted(ConnectionState),
    /// Refused from that state (driver exit 4).
    Refused,
    /// The target cannot do the action at all (driver exit 3).
    Unsupported,
}

impl Transition {
    pub fn label(self) -> String {
        match self {
            Self::Accepted(to) => format!("accepted → {to}"),
            Self::Refused => "refused".into(),
            Self::Unsupported => "unsupported".into(),
        }
    }
}

/// The explored graph: the states reached, in the order reached, and every action tried.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransitionGraph {
    pub reached: Vec<ConnectionState>,
    pub edges: Vec<(ConnectionState, Action, Transition)>,
}
