//! The shared fixtures several cases read, each built once on first use: the CONNECTED
//! connection with its accounts and reference walks, and the tour of driven lifecycles. A check
//! receives the [`RunContext`]: the [`Session`] (through `Deref`, so `ctx.api` reads as the
//! session's) plus these fixtures.

use super::answers::Auth;
use super::errors::SilentReceiver;
use super::graph::TransitionGraph;
use super::http::Api;
use super::outcome::{Failure, Stop};
use super::pagination::{self, Walk};
use super::probe::Probe;
use super::session::Session;
use super::steps::Created;
use super::tour::Tour;
use serde_json::Value;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::OnceCell;

/// What a check returns: `Ok` passes, a [`Stop`] says why not.
pub(super) type CheckFuture = Pin<Box<dyn Future<Output = Result<(), Stop>> + Send>>;
/// The code of one case.
pub(super) type CheckFn = fn(Arc<RunContext>) -> CheckFuture;

/// The CONNECTED connection that read-only cases share, read once.
#[derive(Debug)]
pub(crate) struct Connected {
    pub connection_id: String,
    /// The accounts array as returned (§4.2).
    pub accounts: Vec<Value>,
    /// Per account id, the walk of its transactions with the target's default limit.
    pub walks: Vec<(String, Result<Walk, Stop>)>,
}

impl Connected {
    /// The connection with its accounts, and a walk of each account's transactions with the
    /// target's default limit, read with `api`'s key.
    async fn walked(api: &Api, connection_id: String, accounts: Vec<Value>) -> Self {
        let mut walks = Vec::new();
        for account in &accounts {
            if let Some(id) = account.get("id").and_then(Value::as_str) {
                walks.push((id.to_string(), pagination::walk(api, id, None, None).await));
            }
        }
        Self { connection_id, accounts, walks }
    }

    pub(crate) fn account_ids(&self) -> Vec<String> {
        self.accounts.iter().filter_map(|a| a.get("id").and_then(Value::as_str)).map(str::to_string).collect()
    }

    /// The reference walks, failing on the first that failed.
    pub(crate) fn walks(&self) -> Result<Vec<(&str, &Walk)>, Stop> {
        self.walks.iter().map(|(id, w)| w.as_ref().map(|w| (id.as_str(), w)).map_err(Clone::clone)).collect()
    }
}

/// What a check gets: the session and the fixtures built on it.
pub(crate) struct RunContext {
    pub session: Session,
    connected: OnceCell<Result<Arc<Connected>, Stop>>,
    /// The second client's own CONNECTED connection, when its key is given.
    second: OnceCell<Result<Option<Arc<Connected>>, Stop>>,
    tour: OnceCell<Arc<Tour>>,
    /// A connection created and never driven, shared by the cases that judge a creation.
    created: OnceCell<Result<Arc<Created>, Stop>>,
    /// The transition graph `lifecycle.transition-graph` explored, for the reports.
    graph: std::sync::OnceLock<TransitionGraph>,
    /// What the browser saw running the widget script, probed once per run.
    pub widget_probe: OnceCell<Result<Probe, Stop>>,
    /// Whether webhooks reach the receiver (see [`RunContext::heard`]).
    heard: OnceCell<Result<Vec<String>, SilentReceiver>>,
    /// The state cases' second reads, made once for all of them (`checks::state`).
    pub reread: OnceCell<Result<(), Stop>>,
    /// Findings one case's exploration made about another case's rule, by the owner's id
    /// ([`RunContext::report_to`]).
    found: std::sync::Mutex<std::collections::BTreeMap<&'static str, Vec<Failure>>>,
}

impl Deref for RunContext {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl RunContext {
    pub(crate) fn new(session: Session) -> Arc<Self> {
        Arc::new(Self {
            session,
            connected: OnceCell::new(),
            second: OnceCell::new(),
            tour: OnceCell::new(),
            created: OnceCell::new(),
            reread: OnceCell::new(),
            graph: Default::default(),
            widget_probe: OnceCell::new(),
            heard: OnceCell::new(),
            found: Default::default(),
        })
    }

    /// Reports `failure` under `owner`, the case whose rule it breaks: found by another case's
    /// random exploration, it is judged where that rule is (one judge per rule).
    pub(crate) fn report_to(&self, owner: &'static str, failure: Failure) {
        self.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(owner).or_default().push(failure);
    }

    /// What other cases reported under `case` ([`RunContext::report_to`]), taken once.
    pub(crate) fn found_for(&self, case: &str) -> Vec<Failure> {
        self.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(case).unwrap_or_default()
    }

    pub(crate) fn record_graph(&self, graph: TransitionGraph) {
        let _ = self.graph.set(graph);
    }

    /// The explored transition graph, when the case that explores it ran.
    pub(crate) fn graph(&self) -> Option<&TransitionGraph> {
        self.graph.get()
    }

    /// The shared CONNECTED connection (given with `--connection-id`, or made with the driver),
    /// its accounts, and a reference walk of each account's transactions.
    pub(crate) async fn connected(&self) -> Result<Arc<Connected>, Stop> {
        self.connected
            .get_or_init(|| async {
                let connection_id = match &self.session.plan.connection_id {
                    Some(id) => id.clone(),
                    None if self.session.driver.is_some() => match &self.session.connected_early {
                        Some(id) => id.clone(),
                        None => self.session.connect_new().await?.connection_id,
                    },
                    None => return Err(Stop::ignore("needs a CONNECTED connection: give --driver or --connection-id")),
                };
                let accounts = self.session.accounts_when_ready(&connection_id).await?;
                Ok(Arc::new(Connected::walked(&self.session.api, connection_id, accounts).await))
            })
            .await
            .clone()
    }

    /// The second client's CONNECTED connection, its accounts and their walks, read with its
    /// own key: every response check judges its answers too. `None` without a second key, or
    /// when the target will not connect it (the first client's reads are judged regardless).
    pub(crate) async fn connected_second(&self) -> Result<Option<Arc<Connected>>, Stop> {
        self.second
            .get_or_init(|| async {
                if !self.session.api.has_second_key() || self.session.driver.is_none() {
                    return Ok(None);
                }
                let (created, accounts) = match self.session.connect_new_as(Auth::Second).await {
                    Ok(connected) => connected,
                    Err(Stop::Ignore(..)) => return Ok(None),
                    Err(e) => return Err(e),
                };
                let api = self.session.api.reading_as(Auth::Second);
                Ok(Some(Arc::new(Connected::walked(&api, created.connection_id, accounts).await)))
            })
            .await
            .clone()
    }

    /// The reads every response-checked case builds on: the accounts and every page of every
    /// account of a CONNECTED connection of each client.
    pub(crate) async fn reference_reads(&self) -> Result<(), Stop> {
        self.connected().await?.walks()?;
        if let Some(second) = self.connected_second().await? {
            second.walks()?;
        }
        Ok(())
    }

    /// One connection created for the run and left CREATED (§4.1): the cases that judge a
    /// creation's answer, or a connection never connected, share it (each creation costs the
    /// target a connection and a webhook).
    pub(crate) async fn created(&self) -> Result<Arc<Created>, Stop> {
        self.created.get_or_init(|| async { self.session.create_connection().await.map(Arc::new) }).await.clone()
    }

    /// Whether any webhook delivery reached the receiver, awaited once per run beside the cases
    /// (`preflight::listen`): `Ok` with the preflight's notes on it, `Err` with the diagnosis
    /// that turns the event cases into errors (the setup's problem, not the target's).
    pub(crate) async fn heard(&self) -> &Result<Vec<String>, SilentReceiver> {
        self.heard.get_or_init(|| super::preflight::listen(&self.session)).await
    }

    /// [`RunContext::heard`] if it is known by now, without waiting (a run cut short).
    pub(crate) fn heard_now(&self) -> Option<&Result<Vec<String>, SilentReceiver>> {
        self.heard.get()
    }

    /// The shared tour of driven lifecycles that the event and reaction cases judge.
    pub(crate) async fn tour(&self) -> Result<Arc<Tour>, Stop> {
        self.session.receiver()?;
        Ok(self.tour.get_or_init(|| async { Arc::new(Tour::run(&self.session).await) }).await.clone())
    }
}
