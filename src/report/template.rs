//! The page templates (`templates/report/`, compiled into the binary) and the minijinja
//! environment that renders them from the model.
//!
//! Escaping is minijinja's auto-escaping, chosen by the template's name: every value a template
//! prints is escaped for its format unless it is marked safe (the SVG charts, drawn and escaped
//! by [`crate::svg`]). `report.html` escapes as HTML; `report.md` as Markdown ([`super::markdown::escape`]).
//! The HTML rules are [`crate::svg::escape`]'s rather than minijinja's built-in ones, which also
//! escape `/` (every path on the page) and pass control characters through.

use crate::error::Context;
use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, ErrorKind, Output, State, UndefinedBehavior, Value};

use crate::error::Result;

const TEMPLATES: &[(&str, &str)] = &[
    (
        "report.html",
        include_str!("../../templates/report/report.html.j2"),
    ),
    (
        "report.md",
        include_str!("../../templates/report/report.md.j2"),
    ),
    (
        "feedstock-pr.md",
        include_str!("../../templates/report/feedstock-pr.md.j2"),
    ),
];

/// The auto-escape mode of `.md` templates.
const MARKDOWN: &str = "markdown";

fn auto_escape(name: &str) -> AutoEscape {
    if name.ends_with(".html") {
        AutoEscape::Html
    } else if name.ends_with(".md") {
        AutoEscape::Custom(MARKDOWN.into())
    } else {
        AutoEscape::None
    }
}

/// Print a value as the template's auto-escape mode asks. A template that prints none or an
/// undefined value has a defect: it fails rather than print `none`.
fn format(
    out: &mut Output,
    state: &mut State,
    value: &Value,
) -> std::result::Result<(), minijinja::Error> {
    if value.is_none() || value.is_undefined() {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "the template printed a value that is not there",
        ));
    }
    let text = match value.as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(value.to_string()),
    };
    let text = match state.auto_escape() {
        _ if value.is_safe() => text,
        AutoEscape::Html => crate::svg::escape(&text).into(),
        AutoEscape::Custom(name) if name == MARKDOWN => super::markdown::escape(&text).into(),
        _ => text,
    };
    out.write_str(&text).map_err(minijinja::Error::from)
}

fn environment() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(auto_escape);
    env.set_formatter(format);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Markdown code spans (`report.md` only): `code` for paths and commands, `op` for op names
    // that must not wrap. Escaped by `markdown::code` itself, so marked safe.
    env.add_filter("code", |s: String| {
        Value::from_safe_string(super::markdown::code(&s, false))
    });
    env.add_filter("op", |s: String| {
        Value::from_safe_string(super::markdown::code(&s, true))
    });
    // A block tag on a line of its own leaves no trace in the page.
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .failed_at("template syntax")?,
    );
    for (name, text) in TEMPLATES {
        env.add_template(name, text)
            .failed_at(format_args!("template {name}"))?;
    }
    Ok(env)
}

/// Render template `name` with the model (`r`) and any extra values (the charts).
pub(super) fn render<T: serde::Serialize>(name: &str, report: &T, extra: Value) -> Result<String> {
    let env = environment()?;
    let model = serde_json::to_value(report).failed_at("report model")?;
    let ctx = minijinja::context! {
        r => crate::recipe::emit::template_value(model),
        not_recorded => super::NOT_RECORDED,
        ..extra
    };
    env.get_template(name)
        .and_then(|t| t.render(ctx))
        .failed_at(format_args!("template {name}"))
}

#[cfg(test)]
mod tests {
    use minijinja::{Value, context};

    use super::environment;

    fn render(
        name: &'static str,
        source: &'static str,
        ctx: Value,
    ) -> Result<String, minijinja::Error> {
        let mut env = environment().unwrap();
        env.add_template(name, source).unwrap();
        let t = env.get_template(name).unwrap();
        t.render(ctx)
    }

    #[test]
    fn html_values_are_escaped_by_the_pages_rules_and_charts_pass_through() {
        let page = render(
            "t.html",
            "{{ x }}|{{ chart }}",
            context! { x => "<a href='/p'>&\"\u{1b}", chart => Value::from_safe_string("<svg/>".into()) },
        )
        .unwrap();
        // `/` is kept (paths stay readable), `'` is `&#39;`, a control character is shown.
        assert_eq!(page, "&lt;a href=&#39;/p&#39;&gt;&amp;&quot;\\u{1b}|<svg/>");
    }

    #[test]
    fn markdown_values_cannot_open_a_cell_a_link_or_a_tag() {
        let page = render(
            "t.md",
            "| {{ x }} |",
            context! { x => "a|b [l](j:1) <i>\nx_y" },
        )
        .unwrap();
        assert_eq!(page, "| a\\|b \\[l\\](j:1) &lt;i&gt; x\\_y |");
    }

    #[test]
    fn a_value_that_is_not_there_fails_rather_than_printing_none() {
        assert!(render("t.html", "{{ x }}", context! { x => () }).is_err());
        assert!(render("t.md", "{{ missing }}", context! {}).is_err());
    }
}
