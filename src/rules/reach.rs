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

use super::ChangeSet;
use super::facts::{FileFacts, FunctionFacts};
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

type Distances = HashMap<String, usize>;

/// Which question a table answers: on which side, for which trait, through which functions.
type Question = (Side, &'static str, Through);

/// Distances, computed on first use per side, trait and walk.
#[derive(Debug, Default)]
pub struct ReachTables {
    tables: Slots<Question, Distances>,
    /// Who calls each name, per side and walk: the same for every trait, and most of the cost
    /// of a table (a dozen tables on a large change).
    callers: Slots<(Side, Through), Callers>,
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

/// For each name, the functions that call it, as (file, function) indices into the change, in
/// change order and call order.
type Callers = HashMap<String, Vec<(u32, u32)>>;

impl ChangeSet {
    /// Whether calling `name` can reach a function with `t`, itself or through the functions
    /// it calls (by name, anywhere in the change, at most `depth` calls deep). Used for "this
    /// test now reaches Redis through `create_charge`".
    pub fn reaches(&self, side: Side, name: &str, depth: usize, t: &Trait) -> bool {
        debug_assert!(depth <= MAX_DEPTH);
        self.with_distances((side, t, Through::All), |table| {
            table.get(name).is_some_and(|&d| d <= depth)
        })
    }

    /// Like `reaches`, through code outside tests only, with the path and where it ended.
    pub fn reach(&self, side: Side, name: &str, depth: usize, t: &Trait) -> Option<Reach<'_>> {
        debug_assert!(depth <= MAX_DEPTH);
        self.with_distances((side, t, Through::Code), |table| {
            self.path_to(side, name, depth, t, table)
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
        table: &Distances,
    ) -> Option<Reach<'_>> {
        let mut left = *table.get(name).filter(|&&d| d <= depth)?;
        let mut path = vec![name.to_string()];
        while left > 0 {
            // The first step a breadth-first walk would take: the functions in change order,
            // their callees in call order.
            let current = path.last()?.as_str();
            let step = self
                .functions_named(side, current)
                .filter(|(file, _)| !file.is_test)
                .flat_map(|(_, func)| func.callees.iter())
                .find(|c| table.get(c.as_str()) == Some(&(left - 1)))?;
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
        f: impl FnOnce(&Distances) -> R,
    ) -> R {
        let cell = slot(&self.reach.tables, (side, t.name, through));
        f(cell.get_or_init(|| self.compute(side, t, through)))
    }

    /// Breadth-first backwards from the functions with the trait, over "calls" edges by name.
    fn compute(&self, side: Side, t: &Trait, through: Through) -> Distances {
        let cell = slot(&self.reach.callers, (side, through));
        let callers = cell.get_or_init(|| self.callers(side, through));
        let mut dist: Distances = HashMap::default();
        let mut frontier: Vec<&str> = Vec::new();
        for (_, _, func) in self.walked(side, through) {
            if (t.holds)(func) && !dist.contains_key(&func.name) {
                dist.insert(func.name.clone(), 0);
                frontier.push(&func.name);
            }
        }
        let name_of = |(i, j): (u32, u32)| {
            let file = self.files.get(i as usize)?.side(side)?;
            Some(file.functions.get(j as usize)?.name.as_str())
        };
        for d in 1..=MAX_DEPTH {
            let mut next = Vec::new();
            for name in frontier {
                let of_name = callers.get(name).into_iter().flatten();
                for caller in of_name.filter_map(|&at| name_of(at)) {
                    if !dist.contains_key(caller) {
                        dist.insert(caller.to_string(), d);
                        next.push(caller);
                    }
                }
            }
            frontier = next;
        }
        dist
    }

    /// The functions a walk goes through, with their (file, function) indices.
    fn walked(
        &self,
        side: Side,
        through: Through,
    ) -> impl Iterator<Item = (u32, u32, &FunctionFacts)> {
        self.files
            .iter()
            .enumerate()
            .filter_map(move |(i, f)| Some((i, f.side(side)?)))
            .filter(move |(_, f)| through == Through::All || !f.is_test)
            .flat_map(|(i, f)| {
                f.functions
                    .iter()
                    .enumerate()
                    .map(move |(j, func)| (i as u32, j as u32, func))
            })
    }

    fn callers(&self, side: Side, through: Through) -> Callers {
        let mut callers: Callers = HashMap::default();
        for (i, j, func) in self.walked(side, through) {
            for callee in &func.callees {
                // Looked up before inserted: a name is allocated once, not once per call.
                match callers.get_mut(callee.as_str()) {
                    Some(list) => list.push((i, j)),
                    None => {
                        callers.insert(callee.clone(), vec![(i, j)]);
                    }
                }
            }
        }
        callers
    }
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
                    for c in &func.callees {
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
            proptest::collection::vec(0..NAMES.len(), 0..4),
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
                            .map(|(name, callees, cache)| FunctionFacts {
                                name: NAMES[name].to_string(),
                                qualname: NAMES[name].to_string(),
                                callees: callees.iter().map(|&c| NAMES[c].to_string()).collect(),
                                cache,
                                ..FunctionFacts::default()
                            })
                            .collect(),
                        ..FileFacts::default()
                    }),
                })
                .collect();
            ChangeSet::new(files)
        })
    }

    proptest! {
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

    #[test]
    fn a_name_reaches_through_calls_but_not_further_than_asked() {
        let facts = |name: &str, callees: &[&str], cache: bool| FunctionFacts {
            name: name.to_string(),
            callees: callees.iter().map(|c| c.to_string()).collect(),
            cache,
            ..FunctionFacts::default()
        };
        let change = ChangeSet::new(vec![FileChange {
            path: "app.py".into(),
            old: None,
            new: Some(FileFacts {
                functions: vec![
                    facts("view", &["charge"], false),
                    facts("charge", &["cached_key"], false),
                    facts("cached_key", &[], true),
                ],
                ..FileFacts::default()
            }),
        }]);
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
