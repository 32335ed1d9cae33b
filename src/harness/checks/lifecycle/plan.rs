//! The planner of the lifecycle cases: which actions to try, and where. For the transition
//! graph, the [`Atlas`] the exploring connections share, which hands each its next step; for
//! the random sequences, the strategy that generates them. No I/O: its test plays a target
//! shaped like the sandbox without one.

use crate::harness::rules::graph::{Transition, TransitionGraph};
use crate::spec::{Action, ConnectionState};
use proptest::prelude::*;

/// What the exploring connections share: the graph so far, the pairs claimed, the states whose
/// accounts are judged, and where each connection is (or is heading).
#[derive(Default)]
pub(super) struct Atlas {
    pub(super) graph: TransitionGraph,
    claimed: Vec<(ConnectionState, Action)>,
    pub(super) judged: Vec<Arrival>,
    pub(super) positions: Vec<(usize, ConnectionState)>,
    /// The unclaimed pairs when a connection was last started for what others left: another
    /// starts only once that shrank, so a target whose known paths fail cannot loop.
    leftover: Option<usize>,
}

/// Where a connection's accounts are judged: a state, and whether the connection was CONNECTED
/// before it. Once it was, it has accounts that a server could go on serving in a state where
/// §3.2 and §4.2 refuse them, and a state reached only from CREATED never shows that
/// (`tests/foreign/python-reactions`'s `accounts-after-disconnect` serves them only after a connect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Arrival {
    pub(super) state: ConnectionState,
    pub(super) after_connected: bool,
}

impl Arrival {
    /// Where a connection's accounts are judged before any case does: a new connection's by
    /// `accounts.refused-before-connected`, a connected one's by every read of the shared
    /// connection.
    pub(super) const JUDGED_ELSEWHERE: [Arrival; 3] = [
        Arrival { state: ConnectionState::Created, after_connected: false },
        Arrival { state: ConnectionState::Connected, after_connected: false },
        Arrival { state: ConnectionState::Connected, after_connected: true },
    ];
}

/// One step a connection is to take.
pub(super) struct Plan {
    pub(super) action: Action,
    /// A claimed pair (else a step of a known way to one).
    pub(super) explore: bool,
}

impl Atlas {
    /// The actions not yet tried from `state`. A data action is tried only where it has a
    /// target the harness listed (a CONNECTED connection's account or transaction): it is never
    /// sent blind ([`Walk::step`](super::walk::Walk::step)).
    fn untried(&self, state: ConnectionState) -> impl Iterator<Item = Action> + '_ {
        Action::ALL
            .into_iter()
            .filter(move |a| state == ConnectionState::Connected || !is_data(*a))
            .filter(move |a| !self.claimed.contains(&(state, *a)))
    }

    fn unclaimed(&self) -> usize {
        self.graph.reached.iter().map(|s| self.untried(*s).count()).sum()
    }

    pub(super) fn known(&self, from: ConnectionState, action: Action) -> Option<Transition> {
        self.graph.edges.iter().find(|(f, a, _)| *f == from && *a == action).map(|(_, _, t)| *t)
    }

    /// Whether a fresh connection should start: the created state has untried pairs and no
    /// connection is there to try them, or every connection stopped with pairs left.
    pub(super) fn wants_fresh(&mut self) -> bool {
        let created = ConnectionState::Created;
        if self.untried(created).next().is_some() && !self.positions.iter().any(|(_, s)| *s == created) {
            return true;
        }
        let left = self.unclaimed();
        if self.positions.is_empty() && left > 0 && self.leftover.is_none_or(|before| left < before) {
            self.leftover = Some(left);
            return true;
        }
        false
    }

    /// The next step of connection `me` at `from`: an untried action of `from` (claimed; first
    /// those expected to keep the state, then those leading where work is), else the first
    /// step of the shortest known way to a state with untried actions; `None`: stop.
    ///
    /// The first connection at an [`Arrival`] whose accounts are not judged yet stops there:
    /// its judgement at the end judges them, while every connection's events are awaited at
    /// once (a wait for the events before leaving the state would add one lateness per state
    /// along the connection). Another connection takes the state's untried actions.
    pub(super) fn plan(&mut self, me: usize, from: ConnectionState, after_connected: bool) -> Option<Plan> {
        let arrival = Arrival { state: from, after_connected };
        if !self.judged.contains(&arrival) {
            self.judged.push(arrival);
            return None;
        }
        let rank = |a: &Action| match a.target_state() {
            None => 0,
            Some(to) if to == from => 0,
            Some(to) if !self.graph.reached.contains(&to) || self.untried(to).next().is_some() => 1,
            Some(_) => 2,
        };
        let (action, explore) = match self.untried(from).min_by_key(rank) {
            Some(action) => (action, true),
            None => (self.route(from)?, false),
        };
        if explore {
            self.claimed.push((from, action));
        }
        let leaves = action.target_state().filter(|to| *to != from);
        self.at(me, leaves.unwrap_or(from));
        Some(Plan { action, explore })
    }

    /// The first action of the shortest known accepted way from `from` to a state with untried
    /// actions (breadth first, actions in their order).
    fn route(&self, from: ConnectionState) -> Option<Action> {
        let mut seen: Vec<(ConnectionState, Option<Action>)> = vec![(from, None)];
        let mut at = 0;
        while let Some(&(state, first)) = seen.get(at) {
            if at > 0 && self.untried(state).next().is_some() {
                return first;
            }
            for action in Action::ALL {
                if let Some(Transition::Accepted(to)) = self.known(state, action) {
                    if to != state && !seen.iter().any(|(s, _)| *s == to) {
                        seen.push((to, first.or(Some(action))));
                    }
                }
            }
            at += 1;
        }
        None
    }

    pub(super) fn at(&mut self, me: usize, state: ConnectionState) {
        if let Some(p) = self.positions.iter_mut().find(|(id, _)| *id == me) {
            p.1 = state;
        }
    }

    pub(super) fn record(&mut self, from: ConnectionState, action: Action, transition: Transition) {
        if !self.graph.edges.contains(&(from, action, transition)) {
            self.graph.edges.push((from, action, transition));
        }
        if let Transition::Accepted(to) = transition {
            if !self.graph.reached.contains(&to) {
                self.graph.reached.push(to);
            }
        }
    }
}

/// Whether `action` acts on data (an account or a transaction) rather than on the connection.
pub(super) fn is_data(action: Action) -> bool {
    matches!(action, Action::UpdateAccounts | Action::DeleteTransaction)
}

/// Longest generated sequence.
pub(super) const MAX_STEPS: usize = 5;

/// Sequences of 1 to [`MAX_STEPS`] actions; shrinking drops actions and turns them into
/// `connect`. Half the sequences start with `connect`, and `connect` and the data actions are
/// drawn more often than the others: the data actions only mean something on a CONNECTED
/// connection.
pub(super) fn sequences() -> impl Strategy<Value = Vec<Action>, Tree: Send> {
    use Action::*;
    let first = prop_oneof![Just(Connect), prop::sample::select(Action::ALL.to_vec())];
    let weighted = vec![
        Connect,
        Connect,
        UpdateAccounts,
        UpdateAccounts,
        DeleteTransaction,
        DeleteTransaction,
        FailAuth,
        RequireMfa,
        Error,
        Disconnect,
    ];
    (first, prop::collection::vec(prop::sample::select(weighted), 0..MAX_STEPS)).prop_map(|(first, rest)| {
        let mut actions = vec![first];
        actions.extend(rest);
        actions
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConnectionState::{Connected, Created, Disconnected, Error, FailedAuth, MfaRequired};

    /// A target shaped like the sandbox: disconnected is terminal, data actions need connected.
    fn target(from: ConnectionState, action: Action) -> Transition {
        let to = action.target_state();
        let accepted = match action {
            Action::Connect | Action::FailAuth => matches!(from, Created | FailedAuth | Error | MfaRequired),
            Action::RequireMfa => matches!(from, Created | FailedAuth | Error),
            Action::Error => !matches!(from, Error | Disconnected),
            Action::Disconnect => from != Disconnected,
            Action::UpdateAccounts | Action::DeleteTransaction => from == Connected,
        };
        if accepted {
            Transition::Accepted(to.unwrap_or(from))
        } else {
            Transition::Refused
        }
    }

    #[test]
    fn one_connection_at_a_time_tries_every_pair_once_and_judges_every_state() {
        let mut atlas = Atlas::default();
        atlas.graph.reached.push(Created);
        // As the case starts: other cases judge the accounts of these two states.
        atlas.judged.extend(Arrival::JUDGED_ELSEWHERE);
        let mut connections = 0;
        while atlas.wants_fresh() {
            connections += 1;
            atlas.positions.push((connections, Created));
            let mut state = Created;
            let mut after_connected = false;
            while let Some(plan) = atlas.plan(connections, state, after_connected) {
                let transition = target(state, plan.action);
                if plan.explore {
                    atlas.record(state, plan.action, transition);
                } else {
                    assert_eq!(atlas.known(state, plan.action), Some(transition), "a known way");
                }
                if let Transition::Accepted(to) = transition {
                    state = to;
                    after_connected |= to == Connected;
                }
                atlas.at(connections, state);
            }
            let arrival = Arrival { state, after_connected };
            if !atlas.judged.contains(&arrival) {
                atlas.judged.push(arrival);
            }
            atlas.positions.clear();
        }
        assert_eq!(atlas.graph.reached.len(), 6);
        // Data actions only from the connected state: never sent without a listed target.
        assert_eq!(atlas.graph.edges.len(), 6 * Action::ALL.len() - 5 * 2);
        assert_eq!(atlas.claimed.len(), atlas.graph.edges.len(), "each pair once");
        assert!(atlas.graph.reached.iter().all(|s| atlas.judged.iter().any(|a| a.state == *s)));
        // The states a connection leaves CONNECTED for are judged with its accounts in being.
        for state in [Error, Disconnected] {
            assert!(atlas.judged.contains(&Arrival { state, after_connected: true }), "{state} after connected");
        }
        // Each disconnection ends a connection, and so does the first arrival at each of the
        // other arrivals whose accounts are not judged yet: ten (eight when a state was judged
        // once, whatever came before it), and no more.
        assert_eq!(connections, 10);
    }
}
