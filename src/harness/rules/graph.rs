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
    /// Not sent: a data action from a state that lists nothing to act on (the harness's
    /// choice, so no word about the target).
    NotSent,
}

impl Transition {
    pub fn label(self) -> String {
        match self {
            Self::Accepted(to) => format!("accepted → {to}"),
            Self::Refused => "refused".into(),
            Self::Unsupported => "unsupported".into(),
            Self::NotSent => "not sent (nothing listed to act on)".into(),
        }
    }
}

/// The explored graph: the states reached, in the order reached, and every action tried.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransitionGraph {
    pub reached: Vec<ConnectionState>,
    pub edges: Vec<(ConnectionState, Action, Transition)>,
}

impl TransitionGraph {
    /// The edges sorted, and the states reached breadth first from `created` (actions in their
    /// order), so that the report reads the same whatever order concurrent explorers found them
    /// in; a state no accepted edge leads to keeps its place after those.
    pub fn canonical(mut self) -> Self {
        self.edges.sort();
        let mut order = vec![ConnectionState::Created];
        let mut at = 0;
        while at < order.len() {
            let from = order[at];
            for action in Action::ALL {
                let to = self.edges.iter().find(|(f, a, _)| *f == from && *a == action).map(|(_, _, t)| *t);
                if let Some(Transition::Accepted(to)) = to {
                    if self.reached.contains(&to) && !order.contains(&to) {
                        order.push(to);
                    }
                }
            }
            at += 1;
        }
        order.retain(|s| self.reached.contains(s));
        order.extend(self.reached.iter().filter(|s| !order.contains(s)).copied().collect::<Vec<_>>());
        self.reached = order;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConnectionState::{Connected, Created, Disconnected, Error};

    #[test]
    fn canonical_order_is_breadth_first_whatever_the_finding_order() {
        let edges = vec![
            (Connected, Action::Disconnect, Transition::Accepted(Disconnected)),
            (Created, Action::Error, Transition::Accepted(Error)),
            (Created, Action::Connect, Transition::Accepted(Connected)),
            (Created, Action::UpdateAccounts, Transition::Refused),
        ];
        let graph = TransitionGraph { reached: vec![Created, Disconnected, Error, Connected], edges };
        let graph = graph.canonical();
        assert_eq!(graph.reached, vec![Created, Connected, Error, Disconnected]);
        assert!(graph.edges.windows(2).all(|w| w[0] <= w[1]));
    }
}
