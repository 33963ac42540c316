//! "Does calling X reach something that talks to Redis (or HTTP, or sleeps)?" across the
//! change, by function name, a few calls deep.
//!
//! Rules ask this for every touched function of every file. Answered by a walk from each name,
//! a large change costs (touched functions) × (functions reachable from common names like
//! `get`): minutes on a monorepo pull request. Instead, each question is answered once for
//! every name: a walk backwards from the functions that have the trait gives each name its
//! distance, and a question is a lookup. The witness path a rule cites is rebuilt from the
//! distances, and is the one a breadth-first walk from the name would have found first.

use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxHashMap as HashMap;

use super::facts::{FileFacts, FunctionFacts};
use super::{ChangeSet, Names};
use crate::source::Side;

/// The deepest any rule looks: distances past it are not recorded.
pub const MAX_DEPTH: usize = 3;

/// A property of a function that reachability is asked about. `name` identifies the answers
/// cached for it, so two traits must never share a name.
pub struct Trait {
    pub name: &'static str,
    pub holds: fn(&FunctionFacts) -> bool,
}

pub const CACHE: Trait = Trait {
    name: "cache",
    holds: |f| f.cache,
};
pub const HTTP: Trait = Trait {
    name: "http",
    holds: |f| f.http,
};
pub const PAYMENT: Trait = Trait {
    name: "payment",
    holds: |f| f.payment,
};
pub const SDK: Trait = Trait {
    name: "sdk",
    holds: |f| f.sdk,
};
pub const HTTP_OR_PAYMENT: Trait = Trait {
    name: "http-or-payment",
    holds: |f| f.http || f.payment,
};
pub const SLEEPS: Trait = Trait {
    name: "sleeps",
    holds: |f| f.sleeps,
};

/// How a name reaches a function with a trait.
pub struct Reach<'c> {
    /// Function names from the one asked about to the one that has the trait.
    pub path: Vec<String>,
    pub file: &'c FileFacts,
    pub function: &'c FunctionFacts,
}

/// Which functions a walk goes through.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Through {
    /// Every function of the change.
    All,
    /// Functions outside test files (a test calling the code is not the code calling it).
    Code,
}

/// Which question a table answers: on which side, for which trait, through which functions.
type Question = (Side, &'static str, Through);

/// A distance table: for each function name of the side, by its id (`Names::ids`), how many
/// calls from it reach a function with the trait, or `UNREACHED`.
type Distances = Vec<u8>;

const UNREACHED: u8 = u8::MAX;

/// Distances, computed on first use per side, trait and walk.
#[derive(Debug, Default)]
pub struct ReachTables {
    tables: Slots<Question, Distances>,
    /// Who calls each name, per side: the same for every trait and walk, and most of the cost
    /// of a table (a dozen tables on a large change).
    callers: Slots<Side, Callers>,
}

/// Values computed on first use, per key. Each is computed outside the map's lock: threads
/// asking for the same key wait for the one answer, threads asking for another one go on.
type Slots<K, V> = Mutex<HashMap<K, Arc<OnceLock<V>>>>;

fn slot<K: std::hash::Hash + Eq, V>(slots: &Slots<K, V>, key: K) -> Arc<OnceLock<V>> {
    slots
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(key)
        .or_default()
        .clone()
}

/// For each function name, by id, the functions that call it: their name's id, and whether
/// they are in a test file (which the `Code` walk leaves out).
type Callers = Vec<Vec<(u32, bool)>>;

/// A distance table read by name.
struct Table<'c> {
    names: &'c Names,
    distances: &'c [u8],
}

impl Table<'_> {
    fn get(&self, name: &str) -> Option<usize> {
        let d = *self.distances.get(self.names.id(name)? as usize)?;
        (d != UNREACHED).then_some(usize::from(d))
    }
}

impl ChangeSet {
    /// Whether calling `name` can reach a function with `t`, itself or through the functions
    /// it calls (by name, anywhere in the change, at most `depth` calls deep). Used for "this
    /// test now reaches Redis through `create_charge`".
    pub fn reaches(&self, side: Side, name: &str, depth: usize, t: &Trait) -> bool {
        debug_assert!(depth <= MAX_DEPTH);
        self.with_distances((side, t, Through::All), |table| {
            table.get(name).is_some_and(|d| d <= depth)
        })
    }

    /// Like `reaches`, through code outside tests only, with the path and where it ended.
    pub fn reach(&self, side: Side, name: &str, depth: usize, t: &Trait) -> Option<Reach<'_>> {
        debug_assert!(depth <= MAX_DEPTH);
        self.with_distances((side, t, Through::Code), |table| {
            self.path_to(side, name, depth, t, &table)
        })
    }

    /// Like `reach`, where the answer must not hang on which of several functions of one name
    /// a call meant: from the functions named `name` (those whose qualified name is in
    /// `methods`, where the caller knows the class), every one of them must reach a function
    /// with `t`, and so must every function of each name on the way that is surely called
    /// (`FunctionFacts::loose` are not: `event.get(...)` may be a dict's). In a payment library
    /// each provider has its `get_form`, `capture` and `save`; that one of them sends a request
    /// says nothing of what a test calling another provider's does.
    pub fn reach_surely(
        &self,
        side: Side,
        name: &str,
        methods: Option<&[String]>,
        depth: usize,
        t: &Trait,
    ) -> Option<Reach<'_>> {
        debug_assert!(depth <= MAX_DEPTH);
        self.with_distances((side, t, Through::Code), |table| {
            let mut sure = Sure {
                change: self,
                side,
                t,
                table: &table,
                memo: HashMap::default(),
            };
            let starts: Vec<(&FileFacts, &FunctionFacts)> = sure
                .definitions(name)
                .filter(|(_, func)| methods.is_none_or(|m| m.contains(&func.qualname)))
                .collect();
            if starts.is_empty() || !starts.iter().all(|(_, f)| sure.function(f, depth)) {
                return None;
            }
            // The witness: the first function of each name, its first callee that surely
            // reaches, as far as a function with the trait.
            let mut path = vec![name.to_string()];
            let (mut file, mut function) = *starts.first()?;
            let mut left = depth;
            while !(t.holds)(function) {
                let next = sure_callees(function).find(|c| left > 0 && sure.name(c, left - 1))?;
                left -= 1;
                // Every function of the name reaches it; the one beside the caller is the one
                // the caller most likely means, and the library the finding names is its.
                let beside = sure.definitions(next).find(|(f, _)| f.path == file.path);
                (file, function) = beside.or_else(|| sure.definitions(next).next())?;
                path.push(next.clone());
            }
            Some(Reach {
                path,
                file,
                function,
            })
        })
    }

    /// The path a breadth-first walk from `name` would find to a function with `t`, from the
    /// distances to such functions.
    fn path_to(
        &self,
        side: Side,
        name: &str,
        depth: usize,
        t: &Trait,
        table: &Table<'_>,
    ) -> Option<Reach<'_>> {
        let mut left = table.get(name).filter(|&d| d <= depth)?;
        let mut path = vec![name.to_string()];
        while left > 0 {
            // The first step a breadth-first walk would take: the functions in change order,
            // their callees in call order.
            let current = path.last()?.as_str();
            let step = self
                .functions_named(side, current)
                .filter(|(file, _)| !file.is_test)
                .flat_map(|(_, func)| func.callees.iter())
                .find(|c| table.get(c.as_str()) == Some(left - 1))?;
            path.push(step.clone());
            left -= 1;
        }
        let (file, function) = self
            .functions_named(side, path.last()?)
            .find(|(file, func)| !file.is_test && (t.holds)(func))?;
        Some(Reach {
            path,
            file,
            function,
        })
    }

    /// `f` of the distances table for a side, trait and walk.
    fn with_distances<R>(
        &self,
        (side, t, through): (Side, &Trait, Through),
        f: impl FnOnce(Table<'_>) -> R,
    ) -> R {
        let names = self.names(side);
        let cell = slot(&self.reach.tables, (side, t.name, through));
        let distances = cell.get_or_init(|| self.compute(names, side, t, through));
        f(Table { names, distances })
    }

    /// Breadth-first backwards from the functions with the trait, over "calls" edges by name.
    fn compute(&self, names: &Names, side: Side, t: &Trait, through: Through) -> Distances {
        let cell = slot(&self.reach.callers, side);
        let callers = cell.get_or_init(|| self.callers(names, side));
        let mut distances = vec![UNREACHED; names.functions.len()];
        let mut frontier: Vec<u32> = Vec::new();
        for (file, func) in self.walked(side) {
            if (through == Through::Code && file.is_test) || !(t.holds)(func) {
                continue;
            }
            if let Some(id) = names.id(&func.name)
                && let Some(d) = distances.get_mut(id as usize)
                && *d == UNREACHED
            {
                *d = 0;
                frontier.push(id);
            }
        }
        for d in 1..=MAX_DEPTH as u8 {
            let mut next = Vec::new();
            for id in frontier {
                let of_name = callers.get(id as usize).into_iter().flatten();
                for &(caller, in_test) in of_name {
                    if through == Through::Code && in_test {
                        continue;
                    }
                    if let Some(slot) = distances.get_mut(caller as usize)
                        && *slot == UNREACHED
                    {
                        *slot = d;
                        next.push(caller);
                    }
                }
            }
            frontier = next;
        }
        distances
    }

    /// Builds what every reach question shares, both sides at once, one per thread: who calls
    /// each name. Built on first use, the first rule to ask built it on one thread while the
    /// other thread's rules soon waited for it: about 100 ms of large sparse's review.
    pub fn prepare_reach(&self) {
        let build = |side: Side| {
            let names = self.names(side);
            slot(&self.reach.callers, side).get_or_init(|| self.callers(names, side));
        };
        rayon::join(|| build(Side::Old), || build(Side::New));
    }

    /// Every function of one side, with its file.
    fn walked(&self, side: Side) -> impl Iterator<Item = (&FileFacts, &FunctionFacts)> {
        self.files
            .iter()
            .filter_map(move |f| f.side(side))
            .flat_map(|f| f.functions.iter().map(move |func| (f, func)))
    }

    fn callers(&self, names: &Names, side: Side) -> Callers {
        let mut callers: Callers = vec![Vec::new(); names.functions.len()];
        for (file, func) in self.walked(side) {
            let Some(caller) = names.id(&func.name) else {
                continue;
            };
            for callee in func.callees.iter() {
                // Only names some function has can be reached through.
                if let Some(list) = names.id(callee).and_then(|id| callers.get_mut(id as usize)) {
                    list.push((caller, file.is_test));
                }
            }
        }
        callers
    }
}

/// "Does every function of this name reach the trait within so many calls?", asked along a
/// path and remembered for the query.
struct Sure<'c, 't> {
    change: &'c ChangeSet,
    side: Side,
    t: &'t Trait,
    table: &'t Table<'t>,
    memo: HashMap<(&'c str, usize), bool>,
}

impl<'c> Sure<'c, '_> {
    /// The functions named `name` outside tests.
    fn definitions(&self, name: &str) -> impl Iterator<Item = (&'c FileFacts, &'c FunctionFacts)> {
        self.change
            .functions_named(self.side, name)
            .filter(|(file, _)| !file.is_test)
    }

    fn name(&mut self, name: &str, depth: usize) -> bool {
        // Nothing of this name reaches it at all: the table says so without a walk.
        if self.table.get(name).is_none_or(|d| d > depth) {
            return false;
        }
        // Keyed by the functions' own name, which lives as long as the change.
        let Some((_, first)) = self.definitions(name).next() else {
            return false;
        };
        let key = first.name.as_str();
        if let Some(&known) = self.memo.get(&(key, depth)) {
            return known;
        }
        let functions: Vec<&'c FunctionFacts> = self.definitions(name).map(|(_, f)| f).collect();
        let answer = functions.iter().all(|f| self.function(f, depth));
        self.memo.insert((key, depth), answer);
        answer
    }

    fn function(&mut self, function: &FunctionFacts, depth: usize) -> bool {
        (self.t.holds)(function)
            || (depth > 0 && sure_callees(function).any(|c| self.name(c, depth - 1)))
    }
}

/// The names a function calls that are surely calls of a function of that name: not those it
/// only calls as a method of what may be a dict or a string (`FunctionFacts::loose`).
fn sure_callees(function: &FunctionFacts) -> impl Iterator<Item = &String> {
    function
        .callees
        .iter()
        .filter(|c| function.loose.binary_search(c).is_err())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::FileChange;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The walk forwards from the name, level by level, as rules did it before the tables:
    /// what the tables must answer exactly, path included.
    fn walk<'c>(
        change: &'c ChangeSet,
        name: &str,
        depth: usize,
        holds: fn(&FunctionFacts) -> bool,
        through: Through,
    ) -> Option<(Vec<String>, &'c FunctionFacts)> {
        let mut frontier = vec![vec![name.to_string()]];
        let mut seen = BTreeSet::new();
        for _ in 0..=depth {
            let mut next = Vec::new();
            for path in frontier.drain(..) {
                let callee = path.last()?.clone();
                if !seen.insert(callee.clone()) {
                    continue;
                }
                for (file, func) in change.functions_named(Side::New, &callee) {
                    if through == Through::Code && file.is_test {
                        continue;
                    }
                    if holds(func) {
                        return Some((path, func));
                    }
                    for c in func.callees.iter() {
                        let mut longer = path.clone();
                        longer.push(c.clone());
                        next.push(longer);
                    }
                }
            }
            frontier = next;
        }
        None
    }

    const NAMES: &[&str] = &["a", "b", "c", "d", "e", "f", "get", "pay"];

    /// Files of functions with names from a small set (so names repeat across files, as `get`
    /// does), each calling a few names and perhaps talking to a cache.
    fn change() -> impl Strategy<Value = ChangeSet> {
        let function = (
            0..NAMES.len(),
            proptest::collection::vec((0..NAMES.len(), any::<bool>()), 0..4),
            any::<bool>(),
        );
        let file = (proptest::collection::vec(function, 0..5), any::<bool>());
        proptest::collection::vec(file, 1..5).prop_map(|files| {
            let files = files
                .into_iter()
                .enumerate()
                .map(|(i, (functions, is_test))| FileChange {
                    path: format!("f{i}.py"),
                    old: None,
                    new: Some(FileFacts {
                        path: format!("f{i}.py"),
                        is_test,
                        functions: functions
                            .into_iter()
                            .map(|(name, calls, cache)| {
                                // A name is loose when every call of it is (`facts`).
                                let names = |loose: bool| -> BTreeSet<String> {
                                    calls
                                        .iter()
                                        .filter(|&&(_, l)| l == loose)
                                        .map(|&(c, _)| NAMES[c].to_string())
                                        .collect()
                                };
                                let sure = names(false);
                                let all: BTreeSet<String> =
                                    sure.union(&names(true)).cloned().collect();
                                FunctionFacts {
                                    name: NAMES[name].to_string(),
                                    qualname: NAMES[name].to_string(),
                                    loose: all.difference(&sure).cloned().collect(),
                                    callees: all.into_iter().collect(),
                                    cache,
                                    ..FunctionFacts::default()
                                }
                            })
                            .collect(),
                        ..FileFacts::default()
                    }),
                })
                .collect();
            ChangeSet::new(files)
        })
    }

    /// "Every function of this name outside tests reaches the trait within `depth` calls",
    /// by plain recursion: what `reach_surely` must answer.
    fn every(change: &ChangeSet, name: &str, depth: usize) -> bool {
        let functions: Vec<&FunctionFacts> = change
            .functions_named(Side::New, name)
            .filter(|(file, _)| !file.is_test)
            .map(|(_, f)| f)
            .collect();
        !functions.is_empty() && functions.iter().all(|f| every_fn(change, f, depth))
    }

    fn every_fn(change: &ChangeSet, f: &FunctionFacts, depth: usize) -> bool {
        let sure = |c: &&String| !f.loose.contains(c);
        f.cache
            || (depth > 0
                && f.callees
                    .iter()
                    .filter(sure)
                    .any(|c| every(change, c, depth - 1)))
    }

    proptest! {
        #[test]
        fn reach_surely_answers_what_every_definition_does(
            change in change(),
            depth in 0..=MAX_DEPTH,
        ) {
            for name in NAMES.iter().chain(&["absent"]) {
                let found = change.reach_surely(Side::New, name, None, depth, &CACHE);
                prop_assert_eq!(found.is_some(), every(&change, name, depth));
                // The witness is a real path: each name a callee of the one before, the last
                // function with the trait, no longer than asked.
                if let Some(r) = found {
                    prop_assert!(r.path.len() <= depth + 1);
                    prop_assert!(r.function.cache);
                    prop_assert_eq!(r.path.last(), Some(&r.function.name));
                    for pair in r.path.windows(2) {
                        let calls = change
                            .functions_named(Side::New, &pair[0])
                            .any(|(_, f)| f.callees.contains(&pair[1]) && !f.loose.contains(&pair[1]));
                        prop_assert!(calls);
                    }
                }
            }
        }

        #[test]
        fn the_tables_answer_what_the_walk_finds(change in change(), depth in 0..=MAX_DEPTH) {
            for name in NAMES.iter().chain(&["absent"]) {
                let all = walk(&change, name, depth, CACHE.holds, Through::All);
                prop_assert_eq!(change.reaches(Side::New, name, depth, &CACHE), all.is_some());
                let code = walk(&change, name, depth, CACHE.holds, Through::Code);
                let found = change.reach(Side::New, name, depth, &CACHE);
                prop_assert_eq!(
                    found.as_ref().map(|r| (r.path.clone(), r.function as *const FunctionFacts)),
                    code.map(|(path, f)| (path, f as *const FunctionFacts))
                );
            }
        }
    }

    /// A change of one file whose functions are `(qualified name, callees, talks to a cache)`,
    /// the callees separated by spaces.
    fn one_file(functions: &[(&str, &str, bool)]) -> ChangeSet {
        let function = |&(qualname, callees, cache): &(&str, &str, bool)| FunctionFacts {
            name: qualname.rsplit('.').next().unwrap_or_default().to_string(),
            qualname: qualname.to_string(),
            callees: callees.split_whitespace().map(str::to_string).collect(),
            cache,
            ..FunctionFacts::default()
        };
        ChangeSet::new(vec![FileChange {
            path: "app.py".into(),
            old: None,
            new: Some(FileFacts {
                functions: functions.iter().map(function).collect(),
                ..FileFacts::default()
            }),
        }])
    }

    #[test]
    fn a_method_named_like_another_reaches_only_what_it_calls() {
        let change = one_file(&[
            ("Coinbase.get_form", "remember", false),
            ("Dummy.get_form", "", false),
            ("remember", "", true),
        ]);
        // One `get_form` of two reaches the cache: the name alone says nothing sure.
        assert!(change.reaches(Side::New, "get_form", 1, &CACHE));
        assert!(
            change
                .reach_surely(Side::New, "get_form", None, 1, &CACHE)
                .is_none()
        );
        let coinbase = ["Coinbase.get_form".to_string()];
        let r = change.reach_surely(Side::New, "get_form", Some(&coinbase), 1, &CACHE);
        assert_eq!(
            r.map(|r| r.path),
            Some(vec!["get_form".into(), "remember".into()])
        );
        let dummy = ["Dummy.get_form".to_string()];
        assert!(
            change
                .reach_surely(Side::New, "get_form", Some(&dummy), 1, &CACHE)
                .is_none()
        );
        assert!(
            change
                .reach_surely(Side::New, "get_form", Some(&coinbase), 0, &CACHE)
                .is_none()
        );
    }

    #[test]
    fn a_name_reaches_through_calls_but_not_further_than_asked() {
        let change = one_file(&[
            ("view", "charge", false),
            ("charge", "cached_key", false),
            ("cached_key", "", true),
        ]);
        assert!(change.reaches(Side::New, "view", 2, &CACHE));
        assert!(!change.reaches(Side::New, "view", 1, &CACHE));
        assert!(!change.reaches(Side::Old, "view", 3, &CACHE));
        let r = change
            .reach(Side::New, "view", 3, &CACHE)
            .expect("view reaches the cache in two calls");
        assert_eq!(r.path, ["view", "charge", "cached_key"]);
        assert_eq!(r.function.name, "cached_key");
    }
}
