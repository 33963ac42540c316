//! `--format markdown`: the review as a senior reviewer would post it on the pull request —
//! verdict (with the check against the description and the unknowns), line comments (findings
//! at one place joined), tests worth adding, questions. GitHub-flavoured; every value from the
//! PR goes through `markup`, so no code or description can break the document.

use std::fmt::Write as _;
use std::io::Write;

use super::markup;
use super::texts::{
    Resolved, error_text, plural_ru, question_short_with, question_text_with, resolve_evidence,
    resolve_with, severity_word, verdict_words,
};
use crate::review::description::{self, DescriptionCheck};
use crate::review::{Finding, Lang, Review, Severity};
use crate::rules;

/// Section headings and fixed phrases, in the seed review's register.
struct Words {
    title: &'static str,
    verdict: &'static str,
    check: &'static str,
    unknowns: &'static str,
    unknowns_after: &'static str,
    not_reviewed: &'static str,
    comments: &'static str,
    no_comments: &'static str,
    outside: &'static str,
    nits: &'static str,
    tests: &'static str,
    sketches: &'static str,
    questions: &'static str,
    no_questions: &'static str,
    also_here: &'static str,
    see_check: &'static str,
    all_mentioned: &'static str,
    evidence: &'static str,
}

const EN: Words = Words {
    title: "Review",
    verdict: "1. Verdict",
    check: "Check against the description",
    unknowns: "What the diff does not show that affects the verdict",
    unknowns_after: "Without these, some of the conclusions below are conditional; the questions at the end say which.",
    not_reviewed: "Not reviewed",
    comments: "2. Line comments",
    outside: "Outside this diff: unchanged code the change breaks",
    no_comments: "Nothing to comment on.",
    nits: "Nits",
    tests: "Tests worth adding",
    sketches: "test sketches",
    questions: "3. Questions to the author",
    no_questions: "None: the diff shows everything the verdict depends on.",
    also_here: "Also here",
    see_check: "See the check against the description above.",
    all_mentioned: "Every changed file is covered by the description.",
    evidence: "Evidence",
};

const RU: Words = Words {
    title: "Ревью PR",
    verdict: "1. Вердикт",
    check: "Сверка с описанием",
    unknowns: "Что не видно по diff и влияет на вердикт",
    unknowns_after: "Без них часть выводов ниже условна, это отмечено в вопросах.",
    not_reviewed: "Не проверено",
    comments: "2. Комментарии к строкам",
    outside: "За пределами диффа: неизменённый код, который ломает изменение",
    no_comments: "Комментариев нет.",
    nits: "Мелочи",
    tests: "Тесты, которые стоит добавить",
    sketches: "набросков тестов",
    questions: "3. Вопросы автору",
    no_questions: "Вопросов нет: всё, от чего зависит вердикт, видно по diff.",
    also_here: "Здесь же",
    see_check: "См. сверку с описанием выше.",
    all_mentioned: "Все изменённые файлы упомянуты в описании.",
    evidence: "Основание",
};

fn words(lang: Lang) -> &'static Words {
    match lang {
        Lang::En => &EN,
        Lang::Ru => &RU,
    }
}

/// Findings at one place: same path, overlapping lines (or the same file, for file-level ones),
/// same severity.
struct Comment<'r> {
    path: &'r str,
    lines: Option<(u32, u32)>,
    severity: Severity,
    findings: Vec<(&'r Finding, Resolved)>,
}

pub fn render(review: &Review, lang: Lang, out: &mut dyn Write) -> std::io::Result<()> {
    let mut doc = String::new();
    let w = words(lang);
    let check = description::check(review);
    let comments = comments(review, lang);
    heading(&mut doc, 2, &title(review, w));
    verdict(&mut doc, review, lang, check.as_ref(), &comments);
    // Places the change breaks in files it does not touch: not line comments on the diff.
    let in_diff = |c: &Comment<'_>| review.files.iter().any(|f| f.path == c.path);
    let (here, outside): (Vec<Comment<'_>>, Vec<Comment<'_>>) =
        comments.into_iter().partition(in_diff);
    let comments = here;
    line_comments(&mut doc, lang, check.is_some(), &comments);
    outside_comments(&mut doc, lang, &outside);
    tests(&mut doc, lang, &comments);
    questions(&mut doc, review, lang);
    let _ = writeln!(doc, "<sub>payreview {}</sub>", env!("CARGO_PKG_VERSION"));
    out.write_all(doc.as_bytes())
}

fn heading(doc: &mut String, level: usize, text: &str) {
    let _ = writeln!(doc, "{} {text}\n", "#".repeat(level));
}

/// "Review: <the description's first line>", as the seed titles itself.
fn title(review: &Review, w: &Words) -> String {
    let first = review
        .description
        .as_deref()
        .and_then(|d| d.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(|l| l.trim_start_matches('#').trim());
    match first {
        Some(line) if !line.is_empty() => format!("{}: {}", w.title, markup::prose(line)),
        _ => format!("{}: payreview", w.title),
    }
}

fn verdict(
    doc: &mut String,
    review: &Review,
    lang: Lang,
    check: Option<&DescriptionCheck>,
    comments: &[Comment<'_>],
) {
    let w = words(lang);
    heading(doc, 3, w.verdict);
    let _ = write!(
        doc,
        "**{}.** {}",
        verdict_words(review.decision(), lang),
        summary(review, lang, comments)
    );
    if check.is_some_and(|c| !c.files.is_empty()) {
        doc.push_str(match lang {
            Lang::En => " Part of the change is not in the description: see the check below.",
            Lang::Ru => " Часть изменения в описании не заявлена, см. сверку ниже.",
        });
    }
    doc.push_str("\n\n");
    if let Some(check) = check {
        description_check(doc, review, lang, check);
    }
    if !review.questions.is_empty() {
        let _ = writeln!(doc, "**{}:**\n", w.unknowns);
        for q in &review.questions {
            let _ = writeln!(doc, "- {}", question_short_with(q, lang, markup::fill_line));
        }
        let _ = writeln!(doc, "\n{}\n", w.unknowns_after);
    }
    if !review.errors.is_empty() {
        let _ = writeln!(doc, "**{}:**\n", w.not_reviewed);
        for e in &review.errors {
            let message = error_text(e, lang);
            match e.path.as_str() {
                "" => {
                    let _ = writeln!(doc, "- {}", markup::prose(&message));
                }
                path => {
                    let _ = writeln!(doc, "- {}: {}", markup::code(path), markup::prose(&message));
                }
            }
        }
        doc.push('\n');
    }
}

/// The blockers by name, then how much else there is.
fn summary(review: &Review, lang: Lang, comments: &[Comment<'_>]) -> String {
    let count = |s: Severity| review.findings.iter().filter(|f| f.severity == s).count();
    let (blockers, important, nits) = (
        count(Severity::Blocker),
        count(Severity::Important),
        count(Severity::Nit),
    );
    let named: Vec<String> = comments
        .iter()
        .flat_map(|c| c.findings.iter().map(move |(f, r)| (c, f, r)))
        .filter(|(_, f, _)| f.severity == Severity::Blocker)
        .map(|(_, f, r)| format!("{} ({})", r.title, markup::code(&place(&f.path, f.lines))))
        .collect();
    let rest = rest_phrase(important, nits, lang);
    match (blockers, lang) {
        (0, _) if important + nits == 0 => match lang {
            Lang::En => "No payment-safety problems found in this change.".to_string(),
            Lang::Ru => "Проблем с безопасностью платежей в изменении не найдено.".to_string(),
        },
        (0, Lang::En) => format!("No blockers; see {rest} below."),
        (0, Lang::Ru) => format!("Блокеров нет; ниже {rest}, их стоит посмотреть."),
        (n, Lang::En) => format!(
            "{n} {}: {}. Each has to be fixed before this change can move money safely{}.",
            if n == 1 { "blocker" } else { "blockers" },
            named.join("; "),
            if rest.is_empty() {
                String::new()
            } else {
                format!("; besides them, {rest}")
            }
        ),
        (n, Lang::Ru) => format!(
            "{n} {}: {}. Каждый нужно исправить, прежде чем это изменение сможет безопасно проводить платежи{}.",
            plural_ru(n, ["блокер", "блокера", "блокеров"]),
            named.join("; "),
            if rest.is_empty() {
                String::new()
            } else {
                format!("; кроме них, {rest}")
            }
        ),
    }
}

fn rest_phrase(important: usize, nits: usize, lang: Lang) -> String {
    let mut parts = Vec::new();
    match lang {
        Lang::En => {
            if important > 0 {
                parts.push(format!(
                    "{important} important {}",
                    if important == 1 {
                        "comment"
                    } else {
                        "comments"
                    }
                ));
            }
            if nits > 0 {
                parts.push(format!("{nits} {}", if nits == 1 { "nit" } else { "nits" }));
            }
            parts.join(" and ")
        }
        Lang::Ru => {
            if important > 0 {
                parts.push(format!(
                    "{important} {}",
                    plural_ru(
                        important,
                        ["важное замечание", "важных замечания", "важных замечаний"]
                    )
                ));
            }
            if nits > 0 {
                parts.push(format!(
                    "{nits} {}",
                    plural_ru(nits, ["мелочь", "мелочи", "мелочей"])
                ));
            }
            parts.join(" и ")
        }
    }
}

fn description_check(doc: &mut String, review: &Review, lang: Lang, check: &DescriptionCheck) {
    let w = words(lang);
    let _ = writeln!(doc, "**{}:**\n", w.check);
    let mut items = Vec::new();
    for file in &check.files {
        let functions = if file.functions.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = file.functions.iter().map(|f| markup::code(f)).collect();
            format!(" ({})", names.join(", "))
        };
        let mut item = match lang {
            Lang::En => format!(
                "The change in {}{functions} is not mentioned in the description.",
                markup::code(&file.path)
            ),
            Lang::Ru => format!(
                "Изменение в {}{functions} в описании не упомянуто.",
                markup::code(&file.path)
            ),
        };
        for claim in &file.contradicts {
            let _ = match lang {
                Lang::En => write!(item, " It contradicts “{}”.", markup::prose(claim)),
                Lang::Ru => write!(item, " Оно противоречит фразе «{}».", markup::prose(claim)),
            };
        }
        // What makes an undeclared change a blocker (it changes the charged amount) belongs
        // here, where the reader meets the change.
        let undeclared = review
            .findings
            .iter()
            .find(|f| f.rule == "SCOPE001" && f.path == file.path);
        if let Some(finding) = undeclared.filter(|f| f.notes.contains(&"amount")) {
            let note = rules::entry(finding.rule)
                .and_then(|e| e.meta.notes.get("amount"))
                .map(|t| markup::fill_line(t.get(lang), &finding.args));
            if let Some(note) = note {
                let _ = write!(item, " {note}");
            }
        }
        items.push(item);
    }
    for (path, function) in &check.functions {
        items.push(match lang {
            Lang::En => format!(
                "{}: {} changes; the description does not mention it.",
                markup::code(path),
                markup::code(function)
            ),
            Lang::Ru => format!(
                "{}: меняется {}, в описании об этом ничего нет.",
                markup::code(path),
                markup::code(function)
            ),
        });
    }
    if items.is_empty() {
        items.push(w.all_mentioned.to_string());
    }
    for finding in review.findings.iter().filter(|f| is_provenance(f)) {
        let texts = resolve_with(finding, lang, markup::fill_line, markup::fill_block);
        items.push(format!(
            "{}: {}",
            markup::code(&finding.path),
            texts.message
        ));
    }
    for item in items {
        let _ = writeln!(doc, "- {item}");
    }
    doc.push('\n');
}

/// Findings about where the diff came from (DIFF001…): the verdict's check against the
/// description discusses them, as the seed does.
fn is_provenance(finding: &Finding) -> bool {
    has_tag(finding, "provenance")
}

/// Findings the check against the description states in full (provenance, and SCOPE001's
/// undeclared changes, which are its unmentioned files): their comment only refers to it.
fn in_check(finding: &Finding) -> bool {
    is_provenance(finding) || has_tag(finding, "description")
}

fn has_tag(finding: &Finding, tag: &str) -> bool {
    rules::entry(finding.rule).is_some_and(|e| e.meta.tags.iter().any(|t| t == tag))
}

/// Findings grouped by place, ordered blockers first, then by path and line.
fn comments(review: &Review, lang: Lang) -> Vec<Comment<'_>> {
    let mut sorted: Vec<&Finding> = review.findings.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.path, a.lines.is_some(), a.lines, a.rule).cmp(&(
            &b.path,
            b.lines.is_some(),
            b.lines,
            b.rule,
        ))
    });
    let mut groups: Vec<Comment<'_>> = Vec::new();
    for finding in sorted {
        let texts = resolve_with(finding, lang, markup::fill_line, markup::fill_block);
        // One comment per place and weight: the race and the eviction risk of one key join,
        // but a nit inside a blocker's lines keeps its own comment, as a reviewer writes them.
        let joins = groups
            .iter_mut()
            .rev()
            .take_while(|g| g.path == finding.path)
            .find(|g| {
                g.severity == finding.severity
                    && match (g.lines, finding.lines) {
                        (Some((_, end)), Some((start, _))) => start <= end,
                        (None, None) => true,
                        _ => false,
                    }
            });
        match joins {
            Some(group) => {
                group.lines = group
                    .lines
                    .zip(finding.lines)
                    .map(|((a, b), (c, d))| (a.min(c), b.max(d)));
                group.severity = group.severity.max(finding.severity);
                group.findings.push((finding, texts));
            }
            None => groups.push(Comment {
                path: &finding.path,
                lines: finding.lines,
                severity: finding.severity,
                findings: vec![(finding, texts)],
            }),
        }
    }
    for group in &mut groups {
        group.findings.sort_by(|a, b| {
            b.0.severity
                .cmp(&a.0.severity)
                .then(a.0.lines.cmp(&b.0.lines))
        });
    }
    groups.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.path.cmp(b.path))
            .then_with(|| a.lines.is_some().cmp(&b.lines.is_some()))
            .then_with(|| a.lines.cmp(&b.lines))
    });
    groups
}

fn place(path: &str, lines: Option<(u32, u32)>) -> String {
    match lines {
        Some((a, b)) if a == b => format!("{path}:{a}"),
        Some((a, b)) => format!("{path}:{a}-{b}"),
        None => path.to_string(),
    }
}

/// Findings in files the diff does not touch (callers the change breaks), after the line
/// comments, under their own heading.
fn outside_comments(doc: &mut String, lang: Lang, comments: &[Comment<'_>]) {
    if comments.is_empty() {
        return;
    }
    heading(doc, 3, words(lang).outside);
    for comment in comments {
        one_comment(doc, lang, false, comment);
    }
}

fn line_comments(doc: &mut String, lang: Lang, has_check: bool, comments: &[Comment<'_>]) {
    let w = words(lang);
    heading(doc, 3, w.comments);
    if comments.is_empty() {
        let _ = writeln!(doc, "{}\n", w.no_comments);
        return;
    }
    let (nits, main): (Vec<&Comment<'_>>, Vec<&Comment<'_>>) =
        comments.iter().partition(|c| c.severity <= Severity::Nit);
    for comment in main {
        one_comment(doc, lang, has_check, comment);
    }
    if !nits.is_empty() {
        let _ = writeln!(
            doc,
            "<details>\n<summary>{} ({})</summary>\n",
            w.nits,
            nits.len()
        );
        for comment in nits {
            one_comment(doc, lang, has_check, comment);
        }
        doc.push_str("</details>\n\n");
    }
}

fn one_comment(doc: &mut String, lang: Lang, has_check: bool, comment: &Comment<'_>) {
    let w = words(lang);
    let titles: Vec<&str> = comment
        .findings
        .iter()
        .map(|(_, r)| r.title.as_str())
        .collect();
    heading(
        doc,
        4,
        &format!(
            "{} — {}: {}",
            markup::code(&place(comment.path, comment.lines)),
            severity_word(comment.severity, lang),
            titles.join("; ")
        ),
    );
    let mut referred = false;
    for (n, (finding, texts)) in comment.findings.iter().enumerate() {
        if has_check && in_check(finding) {
            if !referred {
                let _ = writeln!(doc, "{}\n", w.see_check);
                referred = true;
            }
            continue;
        }
        if n > 0 {
            let _ = write!(
                doc,
                "**{} ({}): {}.** ",
                w.also_here,
                severity_word(finding.severity, lang),
                texts.title.trim_end_matches('.')
            );
        }
        let _ = writeln!(doc, "{}\n", texts.message);
        let cited = resolve_evidence(finding, lang, markup::fill_line);
        if !cited.is_empty() {
            let places: Vec<String> = cited
                .iter()
                .map(|e| {
                    format!(
                        "{} {}",
                        markup::code(&format!("{}:{}", e.path, e.line)),
                        e.text
                    )
                })
                .collect();
            let _ = writeln!(doc, "{}: {}\n", w.evidence, places.join("; "));
        }
        if let Some(suggestion) = &texts.suggestion {
            let _ = writeln!(doc, "{suggestion}\n");
        }
    }
    let ids: Vec<String> = comment
        .findings
        .iter()
        .map(|(f, r)| format!("{} {}", f.rule, r.name))
        .collect();
    let _ = writeln!(doc, "<sub>{}</sub>\n", markup::html(&ids.join(" · ")));
}

fn tests(doc: &mut String, lang: Lang, comments: &[Comment<'_>]) {
    let w = words(lang);
    let mut seen = Vec::new();
    let mut sketches = Vec::new();
    for comment in comments {
        for (finding, texts) in &comment.findings {
            let Some(test) = &texts.test else { continue };
            if finding.severity < Severity::Important || seen.contains(&finding.rule) {
                continue;
            }
            seen.push(finding.rule);
            let body = if test.contains("```") {
                test.clone()
            } else {
                markup::fenced("python", test)
            };
            sketches.push(format!(
                "**{}** ({})\n\n{body}\n",
                texts.title.trim_end_matches('.'),
                markup::code(&place(&finding.path, finding.lines))
            ));
        }
    }
    if sketches.is_empty() {
        return;
    }
    heading(doc, 3, w.tests);
    let collapse = sketches.len() > 2;
    if collapse {
        let _ = writeln!(
            doc,
            "<details>\n<summary>{} {}</summary>\n",
            sketches.len(),
            w.sketches
        );
    }
    for sketch in sketches {
        let _ = writeln!(doc, "{sketch}");
    }
    if collapse {
        doc.push_str("</details>\n\n");
    }
}

fn questions(doc: &mut String, review: &Review, lang: Lang) {
    let w = words(lang);
    heading(doc, 3, w.questions);
    if review.questions.is_empty() {
        let _ = writeln!(doc, "{}\n", w.no_questions);
        return;
    }
    for (n, q) in review.questions.iter().enumerate() {
        let _ = writeln!(
            doc,
            "{}. {}",
            n + 1,
            question_text_with(q, lang, markup::fill_line)
        );
    }
    doc.push('\n');
}
