//! PAY013 split-parts-miss-the-total: one amount is split into parts (a bill between guests, a
//! price into installments, a payout between sellers), each part worked out and rounded on its
//! own (`[percent_of(total_cents, 100 * w / whole) for w in weights]`, `part = "%.2f" %
//! (float(total) / count)` repeated `count` times), and nothing hands the parts what the
//! rounding leaves over: they add up to a cent more or less than the amount.
use tree_sitter::Node;

use crate::python::{Fields, NodeIndex, kinds, syntax};
use crate::rules::{Check, Ctx, Gate, Rule, Scan};

pub(crate) static RULE: Rule = Rule {
    id: "PAY013",
    doc: include_str!("../../../rules/pay/PAY013.md"),
    check: Check::Tree(check),
    gate: Gate::When(gate),
};

/// Words of a function (its name, its docstring) or of the list it builds that say an amount
/// is split.
const SPLIT_WORDS: &[&str] = &[
    "split",
    "installment",
    "instalment",
    "share",
    "portion",
    "allocat",
    "distribut",
    "prorat",
    "divide",
];

/// Every finding divides an amount in a function named for a split.
fn gate(s: &Scan<'_>) -> bool {
    !s.facts.is_test && s.mentions(&["/"]) && s.mentions(SPLIT_WORDS)
}

fn check(cx: &mut Ctx<'_>) {
    let (Some(idx), src) = (cx.index(), cx.src()) else {
        return;
    };
    // Only functions that divide: most functions of a file do not, and their names and
    // docstrings are not read.
    let mut dividing: Vec<Node<'_>> = Vec::new();
    for op in idx.all(kinds::BINARY_OPERATOR) {
        if op
            .child_by_field_name("operator")
            .is_some_and(|o| matches!(o.kind(), "/" | "//"))
            && let Some(func) = idx.enclosing(*op, kinds::FUNCTION_DEFINITION)
            && dividing.last().is_none_or(|f| f.id() != func.id())
        {
            dividing.push(func);
        }
    }
    dividing.sort_by_key(|f| f.start_byte());
    dividing.dedup_by_key(|f| f.id());
    for func in dividing {
        if !named_for_a_split(func, src) {
            continue;
        }
        let Some(found) = parts_of_one_amount(idx, func, src) else {
            continue;
        };
        let after = src
            .get(found.at.start_byte()..func.end_byte())
            .unwrap_or("");
        if reconciles(syntax::text(func, src), after, found.total) {
            continue;
        }
        cx.report(&RULE, found.at)
            .arg("function", syntax::function_name(func, src).to_string())
            .arg("total", found.total.to_string())
            .arg("part", syntax::normalized(found.part, src));
    }
}

/// The function's name or its docstring says it splits an amount.
fn named_for_a_split(func: Node<'_>, src: &str) -> bool {
    let name = syntax::function_name(func, src);
    let docstring = func
        .field("body")
        .and_then(|b| b.named_child(0))
        .filter(|s| s.kind() == kinds::EXPRESSION_STATEMENT)
        .and_then(|s| s.named_child(0))
        .filter(|s| s.kind() == kinds::STRING)
        .map_or("", |s| syntax::text(s, src));
    SPLIT_WORDS
        .iter()
        .any(|w| syntax::contains_lowercase(name, w) || syntax::contains_lowercase(docstring, w))
}

/// Parts of one amount built in a function: where, the amount, and the division that makes each
/// part, as written.
struct Parts<'t, 's> {
    at: Node<'t>,
    total: &'s str,
    part: Node<'t>,
}

/// The first list of parts the function builds from one amount: a comprehension that returns or
/// binds them (`[total // n for _ in range(n)]`), or a loop that appends them
/// (`shares.append(round(total * w / whole))`). A part is one when it divides (or is a name
/// the function bound to a division before the list) and names an amount that the loop does not
/// make: the same `total` for every part, not each item's own price.
fn parts_of_one_amount<'t, 's>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    src: &'s str,
) -> Option<Parts<'t, 's>> {
    let own = |n: &Node<'_>| {
        idx.enclosing(*n, kinds::FUNCTION_DEFINITION)
            .is_some_and(|f| f.id() == func.id())
    };
    let comprehensions = idx
        .within(func, kinds::RETURN_STATEMENT)
        .iter()
        .chain(idx.within(func, kinds::ASSIGNMENT))
        .filter(|n| own(n))
        .filter_map(|s| match s.kind() {
            kinds::ASSIGNMENT => s.field("right"),
            _ => s.named_child(0),
        })
        .filter(|v| {
            matches!(
                v.kind(),
                "list_comprehension" | "generator_expression" | "dictionary_comprehension"
            )
        });
    for comprehension in comprehensions {
        // `{guest: round(bill / n, 2) for guest in guests}`: the part is the value.
        let Some(element) = comprehension.field("body").map(|b| {
            if b.kind() == kinds::PAIR {
                b.field("value").unwrap_or(b)
            } else {
                b
            }
        }) else {
            continue;
        };
        let looped = loop_names(comprehension, src);
        if let Some((total, part)) = one_amount_divided(idx, func, element, &looped, src) {
            return Some(Parts {
                at: comprehension,
                total,
                part,
            });
        }
    }
    for &call in idx.within(func, kinds::CALL).iter().filter(|c| own(c)) {
        if syntax::callee_name(call, src) != "append" {
            continue;
        }
        let Some(lp) = idx.enclosing(call, kinds::FOR_STATEMENT).filter(|l| own(l)) else {
            continue;
        };
        let Some(element) = call
            .field("arguments")
            .and_then(|a| a.named_child(0))
            .filter(|a| a.kind() != kinds::KEYWORD_ARGUMENT)
        else {
            continue;
        };
        let looped = loop_names(lp, src);
        if let Some((total, part)) = one_amount_divided(idx, func, element, &looped, src) {
            return Some(Parts {
                at: call,
                total,
                part,
            });
        }
    }
    None
}

/// The names a loop or a comprehension binds for each item (`w` of `for w in weights`, `i,
/// guest` of `for i, guest in enumerate(guests)`).
fn loop_names<'s>(node: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let left = if node.kind() == kinds::FOR_STATEMENT {
        node.field("left")
    } else {
        crate::python::named_children(node)
            .into_iter()
            .find(|c| c.kind() == "for_in_clause")
            .and_then(|c| c.field("left"))
    };
    let Some(left) = left else {
        return Vec::new();
    };
    let mut out = Vec::new();
    collect_names(left, src, &mut out);
    out.into_iter().map(|(name, _)| name).collect()
}

/// The names in `node`, each with the name its attribute chain starts from (`order` for
/// `total_cents` of `order.total_cents`; a plain name is its own).
fn collect_names<'s>(node: Node<'_>, src: &'s str, out: &mut Vec<(&'s str, &'s str)>) {
    if node.kind() == kinds::IDENTIFIER {
        let name = syntax::text(node, src);
        out.push((name, name));
        return;
    }
    if node.kind() == kinds::ATTRIBUTE {
        let mut object = node;
        while let Some(inner) = object.field("object") {
            object = inner;
        }
        if object.kind() == kinds::IDENTIFIER {
            let root = syntax::text(object, src);
            if let Some(attribute) = node.field("attribute") {
                out.push((syntax::text(attribute, src), root));
            }
            out.push((root, root));
            return;
        }
    }
    for child in crate::python::named_children(node) {
        collect_names(child, src, out);
    }
}

/// The amount a part divides, when it is the same for every part: an identifier named for money
/// (`total_cents`, `amount`, `bill`) that is no name of the loop's. The part may divide itself or
/// name what the function bound to a division before (`part = float(total) / count`).
fn one_amount_divided<'t, 's>(
    idx: &NodeIndex<'t>,
    func: Node<'t>,
    element: Node<'t>,
    looped: &[&str],
    src: &'s str,
) -> Option<(&'s str, Node<'t>)> {
    let divides = |node: Node<'_>| {
        idx.within(node, kinds::BINARY_OPERATOR)
            .iter()
            .chain(std::iter::once(&node).filter(|n| n.kind() == kinds::BINARY_OPERATOR))
            .any(|op| {
                op.child_by_field_name("operator")
                    .is_some_and(|o| matches!(o.kind(), "/" | "//"))
            })
    };
    // An attribute of an item (`item.price_cents`) is that item's, made by the loop too. An
    // amount that divides (`line_total / total`) makes a proportion, not a part of itself.
    let amount_in = |node: Node<'_>| -> Option<&'s str> {
        let mut divisors = Vec::new();
        for op in idx
            .within(node, kinds::BINARY_OPERATOR)
            .iter()
            .chain(std::iter::once(&node).filter(|n| n.kind() == kinds::BINARY_OPERATOR))
        {
            if op
                .child_by_field_name("operator")
                .is_some_and(|o| matches!(o.kind(), "/" | "//"))
                && let Some(right) = op.field("right")
            {
                collect_names(right, src, &mut divisors);
            }
        }
        let mut names = Vec::new();
        collect_names(node, src, &mut names);
        names
            .into_iter()
            .find(|(name, root)| {
                !looped.contains(root)
                    && names_an_amount(name)
                    && !divisors.iter().any(|(d, _)| d == name)
            })
            .map(|(name, _)| name)
    };
    if divides(element) {
        return amount_in(element).map(|total| (total, element));
    }
    // A name the part shows, bound once before the list to a division of the amount.
    let mut names = Vec::new();
    collect_names(element, src, &mut names);
    let shown: Vec<&str> = names
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| !looped.contains(n))
        .collect();
    idx.within(func, kinds::ASSIGNMENT)
        .iter()
        .filter(|a| a.end_byte() <= element.start_byte())
        .filter(|a| {
            a.field("left").is_some_and(|l| {
                l.kind() == kinds::IDENTIFIER && shown.contains(&syntax::text(l, src))
            })
        })
        .filter_map(|a| a.field("right"))
        .filter(|r| divides(*r))
        .find_map(|r| amount_in(r).map(|total| (total, r)))
}

/// Words of a name that holds an amount of money.
fn names_an_amount(name: &str) -> bool {
    syntax::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "total"
                | "amount"
                | "price"
                | "cents"
                | "bill"
                | "fare"
                | "balance"
                | "due"
                | "owed"
                | "cost"
                | "minor"
                | "subtotal"
                | "payout"
                | "gross"
                | "net"
        )
    })
}

/// Whether the function gives the parts what the rounding leaves over, or checks that they add
/// up: it subtracts from the amount (`total - part * (count - 1)` for the last one, `leftover =
/// total_cents - sum(shares)`, `gross[seller] - fee` with the fee its own part), keeps a
/// remainder (`divmod`, `%`), adds the parts up once they are made (`after`, from the list on:
/// `sum(weights)` before it is the whole the weights make), or adjusts a part after the fact
/// (`shares[-1] += ...`, `-=`).
fn reconciles(func: &str, after: &str, total: &str) -> bool {
    after.contains("sum(")
        || [
            "remainder",
            "leftover",
            "left_over",
            "residual",
            "divmod(",
            "-=",
            "[-1]",
            "allocate(",
        ]
        .iter()
        .any(|w| func.contains(w))
        || func.match_indices(total).any(|(at, _)| {
            let before = func[..at].chars().next_back();
            let after = func[at + total.len()..].trim_start();
            // `gross[merchant_id] - fee`: the amount of one key, less the rounded piece.
            let after = after
                .strip_prefix('[')
                .and_then(|a| a.split_once(']'))
                .map_or(after, |(_, rest)| rest.trim_start());
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && (after.starts_with("- ") || after.starts_with('%') || after.starts_with("-("))
        })
}
