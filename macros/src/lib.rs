//! `#[coro::main]`: runs a function's body as the main green thread of a
//! coro runtime, the way `#[tokio::main]` does for tokio.
//!
//! Use it through the facade (package `coro-rt`, library `coro`), as
//! `#[coro::main]`; this crate is an implementation detail of it.
//!
//! # Implementation
//!
//! The attribute rewrites
//!
//! ```text
//! fn main() -> R { body }
//! ```
//!
//! into
//!
//! ```text
//! fn main() -> R { ::coro::run(move || -> R { body }) }
//! ```
//!
//! working on `proc_macro`'s token trees directly: it only has to find the
//! signature's return type and the body, so it needs neither `syn` nor
//! `quote` (which would add their build time to every user's).

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

use proc_macro::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

/// Runs the function's body as the main green thread of a new coro runtime
/// (`coro::run`), which returns when the body does, after the other green
/// threads have been stopped. The function keeps its signature: a `main`
/// that returns `io::Result<()>` still does, and `?` works in its body.
///
/// It takes no arguments: build a runtime with `coro::Runtime::builder()`
/// for other settings.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// #[coro::main]
/// fn main() -> std::io::Result<()> {
///     let worker = coro::spawn(|| coro::sleep(Duration::from_millis(1)));
///     worker.join().unwrap()?;
///     Ok(())
/// }
/// ```
///
/// Settings are refused with a message (there is no `flavor` to pick):
///
/// ```compile_fail
/// #[coro::main(flavor = "current_thread")]
/// fn main() {}
/// ```
///
/// and so is an `async fn` (green threads block instead):
///
/// ```compile_fail
/// #[coro::main]
/// async fn main() {}
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    match wrap(args, item) {
        Ok(out) => out,
        Err((span, msg)) => compile_error(span, &msg),
    }
}

/// The rewritten function, or where and why it cannot be.
fn wrap(args: TokenStream, item: TokenStream) -> Result<TokenStream, (Span, String)> {
    if let Some(arg) = args.into_iter().next() {
        return Err((
            arg.span(),
            "#[coro::main] takes no arguments; build a runtime with \
             coro::Runtime::builder() for other settings"
                .into(),
        ));
    }
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let body = match tokens.pop() {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => g,
        other => {
            let span = other.map_or_else(Span::call_site, |t| t.span());
            return Err((span, "#[coro::main] goes on a function with a body".into()));
        }
    };
    let fn_at = tokens
        .iter()
        .position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "fn"))
        .ok_or_else(|| (body.span(), "#[coro::main] goes on a function".to_string()))?;
    if let Some(TokenTree::Ident(a)) = tokens[..fn_at]
        .iter()
        .find(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "async"))
    {
        return Err((
            a.span(),
            "#[coro::main] functions are not async: coro's green threads block \
             instead (remove `async`)"
                .into(),
        ));
    }
    // The return type: the tokens after `->` (which follows the parameter
    // list), up to a `where` clause or the body.
    let params_at = tokens[fn_at..]
        .iter()
        .position(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis))
        .map(|i| fn_at + i)
        .ok_or_else(|| (body.span(), "#[coro::main]: no parameter list".to_string()))?;
    let rest = &tokens[params_at + 1..];
    let mut ret: Vec<TokenTree> = Vec::new();
    if let [TokenTree::Punct(a), TokenTree::Punct(b), ty @ ..] = rest {
        if a.as_char() == '-' && b.as_char() == '>' {
            ret.extend(
                ty.iter()
                    .take_while(|t| !matches!(t, TokenTree::Ident(i) if i.to_string() == "where"))
                    .cloned(),
            );
        }
    }

    // ::coro::run(move || -> RET { body })
    let span = body.span();
    let mut closure: Vec<TokenTree> = vec![
        ident("move", span),
        punct('|', Spacing::Alone, span),
        punct('|', Spacing::Alone, span),
    ];
    if !ret.is_empty() {
        closure.push(punct('-', Spacing::Joint, span));
        closure.push(punct('>', Spacing::Alone, span));
        closure.extend(ret);
    }
    closure.push(TokenTree::Group(body.clone()));
    let call: Vec<TokenTree> = vec![
        punct(':', Spacing::Joint, span),
        punct(':', Spacing::Alone, span),
        ident("coro", span),
        punct(':', Spacing::Joint, span),
        punct(':', Spacing::Alone, span),
        ident("run", span),
        TokenTree::Group(Group::new(
            Delimiter::Parenthesis,
            closure.into_iter().collect(),
        )),
    ];
    let mut new_body = Group::new(Delimiter::Brace, call.into_iter().collect());
    new_body.set_span(span);
    tokens.push(TokenTree::Group(new_body));
    Ok(tokens.into_iter().collect())
}

fn ident(s: &str, span: Span) -> TokenTree {
    TokenTree::Ident(Ident::new(s, span))
}

fn punct(c: char, spacing: Spacing, span: Span) -> TokenTree {
    let mut p = Punct::new(c, spacing);
    p.set_span(span);
    TokenTree::Punct(p)
}

/// `compile_error!("msg")` at `span`.
fn compile_error(span: Span, msg: &str) -> TokenStream {
    let mut lit = proc_macro::Literal::string(msg);
    lit.set_span(span);
    let tokens: Vec<TokenTree> = vec![
        punct(':', Spacing::Joint, span),
        punct(':', Spacing::Alone, span),
        ident("core", span),
        punct(':', Spacing::Joint, span),
        punct(':', Spacing::Alone, span),
        ident("compile_error", span),
        punct('!', Spacing::Alone, span),
        TokenTree::Group(Group::new(
            Delimiter::Parenthesis,
            TokenTree::Literal(lit).into(),
        )),
        punct(';', Spacing::Alone, span),
    ];
    tokens.into_iter().collect()
}
