//! The numbers a retry budget is made of: literals, module constants, parameter defaults, simple
//! local assignments and the loop counter, folded with `+ - * / // **`, `min` and `max`.
//!
//! Anything else (a call to `random`, a value changed in the loop) is unknown: the rules then
//! say less rather than guess.

use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};

/// Where names are looked up.
pub struct Env<'t, 's> {
    pub idx: &'s NodeIndex<'t>,
    pub src: &'s str,
    /// The function the expression is in, for parameter defaults and locals.
    pub func: Option<Node<'t>>,
    /// The loop counter and its value during this attempt.
    pub counter: Option<(&'s str, f64)>,
}

const MAX_DEPTH: usize = 6;

impl<'t, 's> Env<'t, 's> {
    /// Values as `func` (or the module, for `None`) sees them, with no loop counter bound.
    pub fn of(idx: &'s NodeIndex<'t>, src: &'s str, func: Option<Node<'t>>) -> Self {
        Env {
            idx,
            src,
            func,
            counter: None,
        }
    }
}

impl<'t> Env<'t, '_> {
    pub fn eval(&self, node: Node<'_>) -> Option<f64> {
        self.eval_at(node, 0)
    }

    fn eval_at(&self, node: Node<'_>, depth: usize) -> Option<f64> {
        if depth > MAX_DEPTH {
            return None;
        }
        let text = syntax::text(node, self.src);
        match node.kind() {
            kinds::INTEGER | kinds::FLOAT => text.replace('_', "").parse().ok(),
            kinds::PARENTHESIZED_EXPRESSION => self.eval_at(node.named_child(0)?, depth + 1),
            kinds::UNARY_OPERATOR => {
                let value = self.eval_at(node.field("argument")?, depth + 1)?;
                Some(if text.starts_with('-') { -value } else { value })
            }
            kinds::BINARY_OPERATOR => self.binary(node, depth),
            kinds::IDENTIFIER => self.name(node, text, depth),
            // A counter the framework keeps (`self.request.retries`).
            kinds::ATTRIBUTE => self.counter.filter(|(c, _)| *c == text).map(|(_, v)| v),
            kinds::CALL => self.call(node, depth),
            _ => None,
        }
    }

    fn binary(&self, node: Node<'_>, depth: usize) -> Option<f64> {
        let left = self.eval_at(node.field("left")?, depth + 1)?;
        let right = self.eval_at(node.field("right")?, depth + 1)?;
        let op = node.field("operator")?.kind();
        let value = match op {
            "+" => left + right,
            "-" => left - right,
            "*" => left * right,
            "/" if right != 0.0 => left / right,
            "//" if right != 0.0 => (left / right).floor(),
            "**" => left.powf(right),
            _ => return None,
        };
        value.is_finite().then_some(value)
    }

    fn call(&self, node: Node<'_>, depth: usize) -> Option<f64> {
        let name = syntax::callee(node, self.src);
        if name == "timedelta" || name.ends_with(".timedelta") {
            return self.timedelta(node, depth);
        }
        let args: Option<Vec<f64>> = syntax::positional_args(node)
            .into_iter()
            .map(|a| self.eval_at(a, depth + 1))
            .collect();
        let args = args?;
        match name {
            "min" => args.into_iter().reduce(f64::min),
            "max" => args.into_iter().reduce(f64::max),
            "float" | "int" if args.len() == 1 => args.first().copied(),
            _ => None,
        }
    }

    /// `timedelta(hours=1)`, `timedelta(1, 30)`: its seconds.
    fn timedelta(&self, node: Node<'_>, depth: usize) -> Option<f64> {
        const UNITS: [(&str, f64); 7] = [
            ("days", 86_400.0),
            ("seconds", 1.0),
            ("microseconds", 1e-6),
            ("milliseconds", 1e-3),
            ("minutes", 60.0),
            ("hours", 3_600.0),
            ("weeks", 604_800.0),
        ];
        let mut total = 0.0;
        for (i, arg) in syntax::positional_args(node).into_iter().enumerate() {
            total += self.eval_at(arg, depth + 1)? * UNITS.get(i)?.1;
        }
        for (unit, scale) in UNITS {
            if let Some(arg) = syntax::keyword_arg(node, unit, self.src) {
                total += self.eval_at(arg, depth + 1)? * scale;
            }
        }
        total.is_finite().then_some(total)
    }

    fn name(&self, node: Node<'_>, name: &str, depth: usize) -> Option<f64> {
        if let Some((counter, value)) = self.counter
            && counter == name
        {
            return Some(value);
        }
        if let Some(func) = self.func {
            if let Some(default) = parameter_default(func, name, self.src) {
                return self.eval_at(default, depth + 1);
            }
            if let Some(value) = self.local(func, node, name) {
                return self.eval_at(value, depth + 1);
            }
        }
        let value = module_constant(self.idx, name, self.src)?;
        self.eval_at(value, depth + 1)
    }

    /// The last plain assignment to `name` before `at` in `func`, unless the name is also
    /// changed in place (`delay *= 2`): then its value depends on the iteration.
    fn local(&self, func: Node<'t>, at: Node<'_>, name: &str) -> Option<Node<'t>> {
        let changed = self
            .idx
            .within(func, kinds::AUGMENTED_ASSIGNMENT)
            .iter()
            .any(|a| assigned_name(*a, self.src) == Some(name));
        if changed {
            return None;
        }
        self.idx
            .within(func, kinds::ASSIGNMENT)
            .iter()
            .filter(|a| a.start_byte() < at.start_byte())
            .rfind(|a| assigned_name(**a, self.src) == Some(name))?
            .field("right")
    }
}

pub fn assigned_name<'s>(assignment: Node<'_>, src: &'s str) -> Option<&'s str> {
    let left = assignment.field("left")?;
    (left.kind() == kinds::IDENTIFIER).then(|| syntax::text(left, src))
}

/// The default of parameter `name` of `func` (`timeout: float = 15.0` gives `15.0`).
pub fn parameter_default<'t>(func: Node<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    syntax::defaulted_parameter(func, name, src)?.field("value")
}

/// `NAME = value` at module level: the value of the last such assignment.
pub fn module_constant<'t>(idx: &NodeIndex<'t>, name: &str, src: &str) -> Option<Node<'t>> {
    module_assignments(idx)
        .filter(|a| assigned_name(*a, src) == Some(name))
        .last()
        .and_then(|a| a.field("right"))
}

/// Assignments that are statements of the module itself.
pub fn module_assignments<'a, 't>(idx: &'a NodeIndex<'t>) -> impl Iterator<Item = Node<'t>> + 'a {
    // Inside a block it is not a module constant; the index says so without asking tree-sitter
    // for parents, which it finds from the root each time. What is left is checked exactly.
    const BLOCKS: [&str; 8] = [
        kinds::FUNCTION_DEFINITION,
        kinds::CLASS_DEFINITION,
        kinds::IF_STATEMENT,
        kinds::FOR_STATEMENT,
        kinds::WHILE_STATEMENT,
        kinds::TRY_STATEMENT,
        kinds::WITH_STATEMENT,
        kinds::ASSIGNMENT,
    ];
    idx.all(kinds::ASSIGNMENT).iter().copied().filter(|a| {
        BLOCKS.iter().all(|k| idx.enclosing(*a, k).is_none())
            && a.parent()
                .filter(|p| p.kind() == kinds::EXPRESSION_STATEMENT)
                .and_then(|p| p.parent())
                .is_some_and(|m| m.kind() == kinds::MODULE)
    })
}

/// `15` for 15.0, `0.5` for 0.5: seconds as people write them.
pub fn seconds(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{}", value.round() as i64)
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// `24 h`, `5 min`, `90 s`.
pub fn human(value: f64) -> String {
    let whole = value.round() as i64;
    if (value - value.round()).abs() > 1e-9 || whole < 60 {
        return format!("{} s", seconds(value));
    }
    if whole % 3600 == 0 && whole / 3600 <= 48 {
        return format!("{} h", whole / 3600);
    }
    if whole % 86400 == 0 {
        return format!("{} d", whole / 86400);
    }
    if whole % 60 == 0 {
        return format!("{} min", whole / 60);
    }
    format!("{whole} s")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::ParsedFile;

    #[test]
    fn folds_constants_defaults_and_the_counter() {
        let src = "BASE = 2\nTIMEOUT = 60 * 5\n\ndef f(timeout: float = 15.0):\n    delay = BASE ** attempt\n    sleep(delay)\n    g(timeout=timeout)\n";
        let file = ParsedFile::parse(src.to_string()).expect("grammar loads (every parse test)");
        let idx = file.index();
        let func = idx.all(kinds::FUNCTION_DEFINITION).first().copied();
        let env = Env {
            idx,
            src,
            func,
            counter: Some(("attempt", 3.0)),
        };
        let calls = idx.all(kinds::CALL);
        let sleep_arg = calls
            .iter()
            .find(|c| syntax::callee(**c, src) == "sleep")
            .and_then(|c| syntax::positional_args(*c).first().copied());
        assert_eq!(sleep_arg.and_then(|a| env.eval(a)), Some(8.0));
        let timeout = calls
            .iter()
            .find_map(|c| syntax::keyword_arg(*c, "timeout", src));
        assert_eq!(timeout.and_then(|t| env.eval(t)), Some(15.0));
        let constant = module_constant(idx, "TIMEOUT", src);
        assert_eq!(constant.and_then(|c| env.eval(c)), Some(300.0));
        assert_eq!(seconds(15.0), "15");
        assert_eq!(seconds(0.5), "0.5");
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(86400.0), "24 h");
        assert_eq!(human(300.0), "5 min");
        assert_eq!(human(7.0 * 86400.0), "7 d");
        assert_eq!(human(45.0), "45 s");
    }
}
